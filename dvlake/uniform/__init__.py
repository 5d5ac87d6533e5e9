"""UniForm: Iceberg metadata over a Delta table's own Parquet and deletion-vector bytes.

This layer sits between ``log`` and ``txn``: it reads Delta snapshots (``log``), DV bytes
(``dv``) and writes Iceberg files through ``storage``, so the transaction layer can convert
after a commit without importing Spark.
"""
