"""dvlake's SQL front end: sqlglot's Spark parser in front of dvlake's Delta commands.

``dvlake.sql`` is the public entry point; this package holds its parts (tokens and positions,
Delta table references in queries, DML, DDL, Delta's utility statements, and the router).
"""
