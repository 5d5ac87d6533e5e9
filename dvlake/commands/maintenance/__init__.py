"""Keeping a table healthy: OPTIMIZE, REORG PURGE, auto-compaction, VACUUM, RESTORE, manifests."""
