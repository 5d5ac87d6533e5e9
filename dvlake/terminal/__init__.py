"""What the ``dvlake`` command line shows and checks, kept out of ``cli.py``'s command definitions.

``spark_start`` starts local Spark with its own output sent to a log file; ``summaries`` turns a
command's metrics into one sentence; ``preflight`` checks what needs no Spark (is PATH a Delta table,
do the tables a SQL statement names exist) before a command pays for a Spark start.
Nothing here imports PySpark at module level: the log-only commands must stay fast.
"""
