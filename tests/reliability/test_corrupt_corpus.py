"""A corpus of damaged and hostile tables, built by the test from one table it writes.

Every case copies the base table, damages the copy one way, and reads it with dvlake's Spark
reader under a timeout. The only acceptable outcomes: a typed dvlake error (of the class the case
names), or exactly the rows of the table's latest version — never other rows, never a hang.

Base table (Spark-free, ``engine.py``, the commands of ``commands.command_at``): v0 create, v1
append, v2 DELETE with DVs, v3 append (checkpoint at v3), v4 DELETE (DVs updated).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import dvlake
import dvlake.errors as E
from dvlake.config import CONFINE_SESSION_KEY
from tests.reliability.commands import batch_ids, create_table, model_after
from tests.reliability.engine import engine_append, engine_delete
from tests.reliability.tables import bounded, commit_path, data_files, dv_files, edit_commit, log_dir

LATEST = 4
CHECKPOINT_VERSION = 3
TIMEOUT = 240  # generous: a shared CI machine can be slow; a real hang never finishes


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.reliability.commands import command_at, delete_condition

    root = str(tmp_path_factory.mktemp("corpus") / "base")
    create_table(root, checkpoint_interval=CHECKPOINT_VERSION)
    for i in range(1, LATEST + 1):
        if command_at(i) == "append":
            engine_append(root, batch_ids(i))
        else:
            engine_delete(root, delete_condition(i))
    assert os.path.exists(_checkpoint(root)) and len(dv_files(root)) >= 2
    return root


# --- damage helpers ----------------------------------------------------------------------------


def _checkpoint(root: str) -> str:
    return os.path.join(log_dir(root), f"{CHECKPOINT_VERSION:020d}.checkpoint.parquet")


def _truncate(path: str, keep: float | int) -> None:
    data = Path(path).read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    Path(path).write_bytes(data[:n])


def _dv_adds(version: int, fn: Callable[[dict[str, Any]], None]) -> Callable[[str], None]:
    def go(root: str) -> None:
        def edit(acts: list[dict[str, Any]]) -> list[dict[str, Any]]:
            for a in acts:
                if "add" in a and a["add"].get("deletionVector"):
                    fn(a["add"])
            return acts
        edit_commit(root, version, edit)
    return go


def _dv(field: str, value: Any) -> Callable[[str], None]:
    return _dv_adds(LATEST, lambda a: a["deletionVector"].__setitem__(field, value))


def _stats(fn: Callable[[dict[str, Any]], None]) -> Callable[[str], None]:
    def change(a: dict[str, Any]) -> None:
        s = json.loads(a["stats"])
        fn(s)
        a["stats"] = json.dumps(s)
    return _dv_adds(LATEST, change)


def _lines(version: int, fn: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> Callable[[str], None]:
    return lambda root: edit_commit(root, version, fn)


def _no_checkpoint(root: str) -> None:
    os.unlink(_checkpoint(root))
    last = os.path.join(log_dir(root), "_last_checkpoint")
    if os.path.exists(last):
        os.unlink(last)


def _both(*fns: Callable[[str], None]) -> Callable[[str], None]:
    def go(root: str) -> None:
        for f in fns:
            f(root)
    return go


def _dv_file(fn: Callable[[bytearray], bytes]) -> Callable[[str], None]:
    def go(root: str) -> None:
        for path in dv_files(root):
            Path(path).write_bytes(fn(bytearray(Path(path).read_bytes())))
    return go


def _flip(at: int) -> Callable[[bytearray], bytes]:
    def go(raw: bytearray) -> bytes:
        raw[at if at >= 0 else len(raw) + at] ^= 0x5A
        return bytes(raw)
    return go


def _latest_dv_adds(root: str) -> list[dict[str, Any]]:
    with open(commit_path(root, LATEST)) as f:
        return [json.loads(x)["add"] for x in f if '"add"' in x and "deletionVector" in x]


def _replace_dv_files_with(kind: str) -> Callable[[str], None]:
    def go(root: str) -> None:
        for path in dv_files(root):
            os.unlink(path)
            if kind == "dir":
                os.mkdir(path)
            elif kind == "fifo":
                os.mkfifo(path)
    return go


def _replace_data_file(kind: str) -> Callable[[str], None]:
    def go(root: str) -> None:
        path = data_files(root)[0]
        if kind == "truncate":
            _truncate(path, 0.5)
        elif kind == "garbage":
            Path(path).write_bytes(b"PAR1" + os.urandom(64) + b"PAR1")
        elif kind == "missing":
            os.unlink(path)
        elif kind == "fifo":
            os.unlink(path)
            os.mkfifo(path)
        elif kind == "symlink-out":
            outside = os.path.join(os.path.dirname(root), "outside.parquet")
            shutil.move(path, outside)
            os.symlink(outside, path)
    return go


def _add_path(new: Callable[[str, str], str]) -> Callable[[str], None]:
    """Point every add/remove of the first data file at ``new(root, old_path)`` (file moved accordingly)."""
    def go(root: str) -> None:
        first = os.path.basename(data_files(root)[0])
        target = new(root, first)
        dest = os.path.normpath(os.path.join(root, target)) if not target.startswith(("/", "file:")) else \
            target.replace("file://", "")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.abspath(dest) != os.path.abspath(os.path.join(root, first)):
            shutil.copy(os.path.join(root, first), dest)
        for v in range(LATEST + 1):
            def edit(acts: list[dict[str, Any]]) -> list[dict[str, Any]]:
                for a in acts:
                    for k in ("add", "remove"):
                        if k in a and a[k]["path"] == first:
                            a[k]["path"] = target
                return acts
            edit_commit(root, v, edit)
        _no_checkpoint(root)
    return go


def _dv_to_p(location: Callable[[str], str]) -> Callable[[str], None]:
    def go(root: str) -> None:
        target = location(root)
        _dv_adds(LATEST, lambda a: a["deletionVector"].update(storageType="p", pathOrInlineDv=target))(root)
    return go


def _fifo_outside(root: str) -> str:
    fifo = os.path.join(os.path.dirname(root), "dv.fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    return f"file://{fifo}"


def _duplicate_live_path(root: str) -> None:
    add = {k: v for k, v in _latest_dv_adds(root)[0].items() if k != "deletionVector"}
    edit_commit(root, LATEST, lambda acts: acts + [{"add": add}])


def _dv_prefix(prefix: str) -> Callable[[str], None]:
    return _dv_adds(LATEST, lambda a: a["deletionVector"].__setitem__("pathOrInlineDv",
                                                                      prefix + a["deletionVector"]["pathOrInlineDv"]))


def _other_uuid(a: dict[str, Any]) -> None:
    a["deletionVector"]["pathOrInlineDv"] = "0" * 20


def _inline_garbage(a: dict[str, Any]) -> None:
    a["deletionVector"].update(storageType="i", pathOrInlineDv="0000000000", sizeInBytes=8)
    a["deletionVector"].pop("offset", None)


# --- the corpus --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    damage: Callable[[str], None]
    error: type[E.DvlakeError] | tuple[type[E.DvlakeError], ...] | None  # None: the latest rows must come back
    unconfined: bool = False


Corrupt, Log, Proto = E.CorruptDeletionVectorError, E.CorruptLogError, E.DeltaProtocolError
Desc, Missing, Outside = E.InvalidDescriptorError, E.DeletionVectorNotFoundError, E.PathOutsideTableRootError

CASES = [
    # commits
    Case("commit-truncated", lambda r: _truncate(commit_path(r, LATEST), 0.6), Log),
    Case("commit-empty", lambda r: _truncate(commit_path(r, LATEST), 0), Log),
    Case("commit-garbage", lambda r: Path(commit_path(r, LATEST)).write_bytes(os.urandom(300)), Log),
    Case("commit-json-array-line", lambda r: Path(commit_path(r, LATEST)).write_text("[1, 2]\n"), Log),
    Case("commit-json-scalar-line", lambda r: Path(commit_path(r, LATEST)).write_text('"add"\n'), Log),
    Case("version-gap", _both(_no_checkpoint, lambda r: os.unlink(commit_path(r, 2))), Log),
    Case("first-commit-missing-no-checkpoint", _both(_no_checkpoint, lambda r: os.unlink(commit_path(r, 0))),
         (Log, E.VersionNotFoundError)),
    Case("unknown-action-ignored", _lines(LATEST, lambda a: a + [{"futureAction": {"x": 1}}]), None),
    Case("commit-info-only-commit", lambda r: Path(commit_path(r, LATEST + 1)).write_text(
        json.dumps({"commitInfo": {"operation": "NOOP"}}) + "\n"), None),
    Case("add-without-path", _dv_adds(LATEST, lambda a: a.pop("path")), (Log, Proto)),
    Case("add-size-not-a-number", _dv_adds(LATEST, lambda a: a.__setitem__("size", "big")), (Log, Proto)),
    Case("protocol-missing", _both(_no_checkpoint, _lines(0, lambda a: [x for x in a if "protocol" not in x])), Log),
    Case("metadata-missing", _both(_no_checkpoint, _lines(0, lambda a: [x for x in a if "metaData" not in x])), Log),
    Case("schema-string-garbage", _both(_no_checkpoint, _lines(0, lambda a: [
        {**x, "metaData": {**x["metaData"], "schemaString": "{not json"}} if "metaData" in x else x for x in a])),
        (Log, Proto)),
    Case("unknown-reader-feature", _lines(LATEST, lambda a: a + [{"protocol": {
        "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors", "timeTravelToMars"],
        "writerFeatures": ["deletionVectors", "timeTravelToMars"]}}]), E.UnsupportedFeatureError),
    Case("reader-feature-not-a-writer-feature", _lines(LATEST, lambda a: a + [{"protocol": {
        "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors", "timeTravelToMars"],
        "writerFeatures": ["deletionVectors"]}}]), Proto),
    Case("reader-version-99", _lines(LATEST, lambda a: a + [{"protocol": {"minReaderVersion": 99,
                                                                          "minWriterVersion": 7}}]), Proto),
    # checkpoints
    Case("checkpoint-truncated", lambda r: _truncate(_checkpoint(r), 0.5), None),
    Case("checkpoint-empty", lambda r: _truncate(_checkpoint(r), 0), None),
    Case("checkpoint-garbage", lambda r: Path(_checkpoint(r)).write_bytes(os.urandom(500)), None),
    Case("checkpoint-garbage-and-commit-0-gone", _both(lambda r: Path(_checkpoint(r)).write_bytes(b"x"),
                                                      lambda r: os.unlink(commit_path(r, 0))), (Log, E.VersionNotFoundError)),
    Case("last-checkpoint-garbage", lambda r: Path(log_dir(r), "_last_checkpoint").write_bytes(b"\x00{{"), None),
    Case("last-checkpoint-points-nowhere", lambda r: Path(log_dir(r), "_last_checkpoint").write_text(
        '{"version": 999, "size": 3}'), None),
    # stats (planning metadata)
    Case("stats-garbage", _dv_adds(LATEST, lambda a: a.__setitem__("stats", "{nope")), None),
    Case("stats-num-records-low", _stats(lambda s: s.__setitem__("numRecords", 1)), None),
    Case("stats-num-records-high", _stats(lambda s: s.__setitem__("numRecords", 10**9)), None),
    Case("stats-min-max-wrong", _stats(lambda s: s.update(minValues={"id": -5}, maxValues={"id": -1})), None),
    # descriptors
    Case("dv-cardinality-zero", _dv("cardinality", 0), Corrupt),
    Case("dv-cardinality-plus-one", _dv_adds(LATEST, lambda a: a["deletionVector"].__setitem__(
        "cardinality", a["deletionVector"]["cardinality"] + 1)), Corrupt),
    Case("dv-cardinality-equals-num-records", _dv_adds(LATEST, lambda a: a["deletionVector"].__setitem__(
        "cardinality", json.loads(a["stats"])["numRecords"])), Corrupt),
    Case("dv-cardinality-not-a-number", _dv("cardinality", "many"), (Desc, Log)),
    Case("dv-size-plus-one", _dv_adds(LATEST, lambda a: a["deletionVector"].__setitem__(
        "sizeInBytes", a["deletionVector"]["sizeInBytes"] + 1)), Corrupt),
    Case("dv-size-2-pow-31", _dv("sizeInBytes", 2**31), (Corrupt, Log)),
    Case("dv-size-negative", _dv("sizeInBytes", -8), (Corrupt, Desc)),
    Case("dv-offset-zero", _dv("offset", 0), Corrupt),
    Case("dv-offset-past-end", _dv("offset", 10**6), Corrupt),
    Case("dv-offset-negative", _dv("offset", -3), (Corrupt, Desc)),
    Case("dv-storage-type-unknown", _dv("storageType", "x"), Desc),
    Case("dv-path-too-short", _dv("pathOrInlineDv", "abc"), Desc),
    Case("dv-path-bad-z85", _dv("pathOrInlineDv", "~" * 20), Desc),
    Case("dv-path-other-uuid", _dv_adds(LATEST, _other_uuid), Missing),
    Case("dv-field-missing", _dv_adds(LATEST, lambda a: a["deletionVector"].pop("cardinality")), Desc),
    Case("dv-inline-garbage", _dv_adds(LATEST, _inline_garbage), (Corrupt, Desc)),
    # DV bytes
    Case("dv-bytes-flipped", _dv_file(_flip(12)), Corrupt),
    Case("dv-crc-flipped", _dv_file(_flip(-1)), Corrupt),
    Case("dv-version-byte", _dv_file(_flip(0)), Corrupt),
    Case("dv-file-truncated", _dv_file(lambda raw: bytes(raw[: len(raw) // 2])), Corrupt),
    Case("dv-file-empty", _dv_file(lambda raw: b""), Corrupt),
    Case("dv-file-missing", lambda r: [os.unlink(p) for p in dv_files(r)], Missing),
    Case("dv-file-is-a-directory", _replace_dv_files_with("dir"), E.NotARegularFileError),
    Case("dv-file-is-a-fifo", _replace_dv_files_with("fifo"), E.NotARegularFileError),
    Case("dv-size-field-2-pow-31", _dv_file(lambda raw: bytes(raw[:1] + struct.pack(">I", 2**31) + raw[5:])), Corrupt),
    # data files
    Case("data-file-missing", _replace_data_file("missing"), E.DataFileNotFoundError),
    Case("data-file-truncated", _replace_data_file("truncate"), E.CorruptDataFileError),
    Case("data-file-garbage", _replace_data_file("garbage"), E.CorruptDataFileError),
    Case("data-file-is-a-fifo", _replace_data_file("fifo"), E.NotARegularFileError),
    Case("data-file-symlink-outside", _replace_data_file("symlink-out"), Outside),
    # duplicate and conflicting actions
    Case("path-live-twice", _duplicate_live_path, Log),
    Case("same-add-twice-in-one-commit", _lines(LATEST, lambda a: a + [x for x in a if "add" in x][:1]), None),
    Case("remove-of-unknown-path", _lines(LATEST, lambda a: a + [{"remove": {"path": "nope.parquet",
                                                                          "deletionTimestamp": 1, "dataChange": True}}]),
         None),
    # hostile paths
    Case("data-path-dotdot", _add_path(lambda root, p: f"../{p}"), Outside),
    Case("data-path-absolute-outside", _add_path(lambda root, p: f"file://{os.path.dirname(root)}/elsewhere/{p}"), Outside),
    Case("data-path-absolute-inside", _add_path(lambda root, p: f"file://{root}/{p}"), None),
    Case("dv-prefix-dotdot", _dv_prefix("../"), Outside),
    Case("dv-prefix-separator", _dv_prefix("ab/"), Outside),
    Case("dv-p-to-etc-passwd", _dv_to_p(lambda r: "file:///etc/passwd"), Outside),
    Case("dv-p-to-etc-passwd-unconfined", _dv_to_p(lambda r: "file:///etc/passwd"), Corrupt, unconfined=True),
    Case("dv-p-to-fifo-unconfined", _dv_to_p(_fifo_outside), E.NotARegularFileError, unconfined=True),
    Case("dv-p-to-dev-zero-unconfined", _dv_to_p(lambda r: "file:///dev/zero"), E.NotARegularFileError, unconfined=True),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corrupt_table(spark, base: str, tmp_path: Path, case: Case) -> None:
    root = str(tmp_path / "t")
    shutil.copytree(base, root)
    case.damage(root)
    expected = sorted(model_after(LATEST + 1))
    if case.unconfined:
        spark.conf.set(CONFINE_SESSION_KEY, "false")
    try:
        got = bounded(spark, lambda: sorted(r.id for r in dvlake.read(spark, root).select("id").collect()), TIMEOUT)
    except E.DvlakeError as exc:
        assert case.error is not None, f"{case.name}: the table should read, but: {exc!r}"
        assert isinstance(exc, case.error), f"{case.name}: expected {case.error}, got {exc!r}"
        _assert_no_echo(exc)
        return
    finally:
        spark.conf.unset(CONFINE_SESSION_KEY)
    assert got == expected, f"{case.name}: WRONG ROWS"
    assert case.error is None, f"{case.name}: read the right rows although {case.error} was expected (fine, but update the case)"


def _assert_no_echo(exc: BaseException) -> None:
    """No error quotes the contents of /etc/passwd (the hostile-path cases point DVs at it)."""
    text = str(exc)
    assert "root:" not in text and "/bin/" not in text, text


def test_corpus_size() -> None:
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)
