"""Reading about a table without changing it: DESCRIBE, DV health and its report, the change feed, doctor."""
