"""Adapters to the libraries dvlake patches at run time (today: PySpark's reader, writer and session classes)."""
