"""Changing what a table is: properties, columns, constraints, protocol and features, CONVERT TO DELTA."""
