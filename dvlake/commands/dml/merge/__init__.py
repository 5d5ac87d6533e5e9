"""MERGE: upserts and friends, with deletion vectors for the target rows they change (copy-on-write when off).

How it runs (delta-spark's MergeIntoCommand, restated for DataFrames):

- **Insert-only** (only NOT MATCHED clauses): source left-anti-join target on the ON condition,
  the insert clauses applied, new files added. No target file is touched, no DV written.
- Otherwise the source is **materialized** once (``localCheckpoint``) with a row id, so every later
  step sees the same rows even when the source is non-deterministic or changes underneath.
  1. *Matches*: source ⋈ target (live rows, each with its file position and row index) on ON,
     materialized. A target row matched by several source rows raises
     ``DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE`` here, before anything is written
     (except with a lone unconditional ``WHEN MATCHED THEN DELETE``, where duplicates are harmless).
  2. *Changes*: the matched pairs through the MATCHED clauses, the unmatched source rows (anti join on
     the row id) through the NOT MATCHED clauses, the unmatched target rows (anti join on file and row)
     through the NOT MATCHED BY SOURCE clauses; the first clause whose condition holds wins.
  3. Target rows updated or deleted are marked in DVs by the code DELETE uses (``dv_marking.py``);
     with DVs off their files are rewritten with the untouched rows copied. Updated and inserted rows
     go to new files. One commit.
- The ON condition is evaluated on the two sides' own columns under their aliases (``t``/``s``), as
  delta-spark resolves it; each matched pair is then wrapped in one struct column per side, named by the
  aliases, so the clauses' ``s.id`` and ``t.id`` resolve as field accesses, and names unique to one side also
  resolve unqualified. The bookkeeping columns get a random suffix per command, so no user column can collide
  with them.

The package, one module per concern (as delta-rs splits ``operations/merge/``):

- ``spec``: clauses, the spec, outcome codes; ``builder``: ``DeltaMergeBuilder``; ``command``: ``merge()``,
  the checks, the prepared source, the matches and the choice of path;
- ``names``: which names each clause sees, checked before any job; ``frames``: the sides as frames, the join;
  ``clauses``: clause evaluation; ``evolution``: schema evolution;
- ``with_dvs``, ``copy_on_write`` and ``insert_only``: the three paths; ``steps``: what the paths share (multiple-match
  check, broadcasting, gathered marks, change-data files, metrics, the commit);
- ``pruning``: ON-condition conjuncts that prune target files; ``source``: whether the source is materialized.
"""

from dvlake.commands.dml.merge.builder import DeltaMergeBuilder, result_frame
from dvlake.commands.dml.merge.command import merge
from dvlake.commands.dml.merge.evolution import evolves
from dvlake.commands.dml.merge.spec import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, RESULT_SCHEMA, MergeClause, MergeSpec

__all__ = ["MATCHED", "NOT_MATCHED", "NOT_MATCHED_BY_SOURCE", "RESULT_SCHEMA", "DeltaMergeBuilder", "MergeClause", "MergeSpec",
           "evolves", "merge", "result_frame"]
