"""Which ON-condition conjuncts MERGE may prune target files with (``commands/merge/pruning.py``), without Spark.

A conjunct is used only when every column it names is the target's; the kept part, pruned against file stats,
must never drop a file that holds a row the whole condition could match.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from dvlake.commands.dml.merge.pruning import target_only
from dvlake.log.condition import Condition
from dvlake.log.predicates import FileFacts, prune

TARGET = ["id", "p", "v", "addr"]
UNQUALIFIED = ["p", "addr"]  # the source has id and v; its alias is s, the target's t


def _parsed(text: object) -> Condition:
    cond = Condition.of(text)  # MERGE parses its conditions once, at its entry; pruning reads that tree
    assert cond is not None
    return cond


def kept(text: object, unqualified: list[str] = UNQUALIFIED, alias: str | None = "t") -> str | None:
    cond = target_only(_parsed(text), alias, TARGET, unqualified)
    return None if cond is None else cond.tree.sql(dialect="spark")


@pytest.mark.parametrize(("text", "expected"), [
    ("t.id = s.id", None),
    ("t.id = s.id AND t.p = 'a'", "t.p = 'a'"),
    ("(t.p = 'a' AND t.id = s.id) AND t.v > 3", "t.p = 'a' AND t.v > 3"),
    ("t.id = s.id OR t.p = 'a'", None),                      # a disjunct alone proves nothing
    ("t.id = s.id AND p IN ('a', 'b')", "p IN ('a', 'b')"),  # a name only the target has
    ("t.id = s.id AND v > 3", None),                         # v is the source's too: ambiguous, never used
    ("t.id = s.id AND s.p = 'a'", None),                     # the source's
    ("t.id = s.id AND t.v > s.v", None),                     # reads both sides
    ("t.id = s.id AND t.nope = 1", None),                    # not a target column
    ("t.id = s.id AND addr.city = 'x'", "addr.city = 'x'"),  # a target struct's field, unqualified
    ("t.id = s.id AND hash(t.*) = 1", None),
])
def test_only_conjuncts_reading_the_target_alone_are_kept(text: str, expected: str | None) -> None:
    assert kept(text) == expected


def test_a_column_condition_or_no_alias_is_handled_conservatively() -> None:
    assert kept(object()) is None  # a Column: opaque
    assert kept("id = 5 AND p = 'a'", alias=None) == "p = 'a'"  # without an alias only unqualified target names


def test_the_kept_part_prunes_only_files_it_proves_empty() -> None:
    cond = target_only(_parsed("t.id = s.id AND t.v BETWEEN 10 AND 20"), "t", TARGET, UNQUALIFIED)
    assert cond is not None
    stats = pa.array([json.dumps({"numRecords": 5, "minValues": {"v": lo}, "maxValues": {"v": hi},
                                  "nullCount": {"v": 0}}) for lo, hi in [(0, 9), (5, 15), (21, 30), (20, 20)]])
    facts = FileFacts(stats, [], [()] * 4, {"id": "long", "v": "long", "p": "string"}, {"id": "id", "v": "v"})
    assert list(prune(cond, facts).keep) == [False, True, False, True]
