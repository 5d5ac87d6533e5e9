"""One module per command; each composes the log, transaction and Spark layers."""
