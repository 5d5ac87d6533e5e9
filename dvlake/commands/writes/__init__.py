"""Writing DataFrames into tables: batch writes and their options, the streaming sink, TRUNCATE."""
