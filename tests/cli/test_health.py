"""DV health: numbers checked against a table with known deletions and against delta-spark's tables,
the pictures and the HTML page, header checks, and the `dvlake health` command in a subprocess."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from dvlake.commands.inspection.health import (
    NATIVE,
    PYTHON,
    READ_PATHS,
    estimate_read_overhead,
    read_path_for,
    table_health,
)
from dvlake.log.snapshot import Snapshot
from tests.cli.conftest import KNOWN, invoke, run_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_known_table_numbers(known_table: str) -> None:
    report = table_health(known_table)
    s = report.summary
    for key in ("files", "files_with_dv", "physical_rows", "deleted_rows", "version"):
        assert s[key] == KNOWN[key], key
    assert s["deleted_ratio"] == pytest.approx(46 / 400)
    per_part = dict(zip(report.partitions["partition"], report.partitions["deleted_rows"], strict=True))
    assert per_part == KNOWN["per_partition"]
    ratios = sorted(report.files.loc[report.files["has_dv"], "deleted_ratio"])
    assert ratios == pytest.approx([0.02, 0.2, 0.2, 0.5])
    # three DELETEs wrote three DV files; the first packs the DVs of both files of part a
    live = report.dv_files[report.dv_files["live_dvs"] > 0]
    assert sorted(live["live_dvs"]) == [1, 1, 2] and s["max_dvs_per_dv_file"] == 2
    assert (live["live_bytes"] == live["size_bytes"]).all() and s["dv_stale_bytes"] == 0  # nothing superseded yet
    assert s["dv_live_bytes"] == 3 + int(report.files["dv_size_bytes"].sum()) + 8 * 4  # version bytes + bitmaps + size/CRC
    assert list(report.versions.itertuples(index=False, name=None)) == KNOWN["dv_history"]
    assert not report.problems


@pytest.mark.parametrize("setting", ["false", "true"])
def test_known_table_read_overhead_follows_the_stated_model(known_table: str, setting: str) -> None:
    report = table_health(known_table, read_path=setting)
    path = PYTHON if setting == "false" else NATIVE
    assert report.read_path is path and report.summary["read_path"] == path.name
    f = report.files
    # a file with a DV costs its rows x (interpolated time ratio - 1); the model's points are the benchmark's, made
    # non-decreasing: the python path's are already, the native full scan's (1.45, 1.06, 1.17) pool to their mean
    points = path.full_scan
    ys = [p[1] for p in points] if path is PYTHON else [sum(p[1] for p in points) / 3] * 3
    part_b = f[f["deleted_ratio"] == 0.5].iloc[0]
    assert part_b["overhead_rows_full_scan"] == pytest.approx(50 * (ys[-1] - 1))  # clamped at 10 %
    part_c = f[f["deleted_ratio"] == 0.02].iloc[0]
    x = (np.log10(0.02) - np.log10(0.01)) / (np.log10(0.1) - np.log10(0.01))
    assert part_c["overhead_rows_full_scan"] == pytest.approx(50 * (ys[1] + x * (ys[2] - ys[1]) - 1))
    assert (f.loc[~f["has_dv"], "overhead_rows_full_scan"] == 0).all()
    assert report.summary["est_full_scan_overhead"] == pytest.approx(f["overhead_rows_full_scan"].sum() / 400)
    agg = estimate_read_overhead(np.array([1000]), np.array([1]), np.array([True]), path.narrow_aggregate)
    assert agg[0] == pytest.approx(1000 * (path.narrow_aggregate[0][1] - 1))  # 0.1 %: the first measured point
    assert report.summary["est_fixed_query_seconds"] == (0.25 if path is PYTHON else 0.0)
    assert path.label in report.model_text


@pytest.mark.parametrize("path", list(READ_PATHS.values()), ids=list(READ_PATHS))
def test_read_overhead_never_falls_as_more_rows_are_deleted(path: object) -> None:
    """More deleted rows never make a file, or a partition of equal files, look cheaper to read, on either path and
    for either query; the native full scan's measured points (1.45x at 0.1 %, 1.06x at 1 %) are not monotonic, so
    this fails without the non-decreasing fit."""
    assert isinstance(path, type(NATIVE))
    ratios = np.concatenate([np.zeros(1), np.logspace(-6, 0, 2000)])
    rows = np.full(len(ratios), 1_000_000)
    deleted = np.round(ratios * rows).astype(np.int64)
    for points in (path.full_scan, path.narrow_aggregate):
        cost = estimate_read_overhead(rows, deleted, np.ones(len(rows), bool), points)
        assert (np.diff(cost) >= -1e-9).all()
        assert (cost >= 0).all()


def test_health_and_sessions_take_the_jar_from_one_place() -> None:
    """health decides the read path without PySpark, from ``native_jar`` as sessions do: the two agree."""
    import pyspark

    from dvlake import native_jar
    from dvlake.spark import native

    assert read_path_for("false")[0] is PYTHON and read_path_for("TRUE")[0] is NATIVE
    jar = native.jar_for(pyspark.__version__)
    expected = NATIVE if jar is not None else PYTHON
    model, why = read_path_for(None)
    assert model is expected
    if jar is not None:
        assert str(jar) in why and native_jar.find_jar(pyspark.__version__, build=False).path == jar


def test_known_table_recommendations_ranked_by_rows_reclaimed(known_table: str) -> None:
    recs = table_health(known_table, read_path="true").recommendations
    assert [(r.action, r.partition, r.rows_reclaimed, r.files_rewritten) for r in recs] == [
        ("REORG PURGE", "part=b", 25, 1),  # a lone file at 50 %: OPTIMIZE would skip it
        ("OPTIMIZE", "part=a", 20, 2),  # two files at 20 %
    ]  # part c (2 %) is below delta-spark's maxDeletedRowsRatio 5 %; part d has nothing
    assert recs[0].command == f'dvlake purge "{known_table}" --where "part = \'b\'"'
    assert recs[0].sql == f"REORG TABLE delta.`{known_table}` WHERE part = 'b' APPLY (PURGE)"
    assert recs[1].sql == f"OPTIMIZE delta.`{known_table}` WHERE part = 'a'"
    lower = table_health(known_table, max_deleted_ratio=0.01, read_path="true").recommendations
    assert ("REORG PURGE", "part=c", 1) in [(r.action, r.partition, r.rows_reclaimed) for r in lower]


def test_purge_is_recommended_where_dvs_cost_readers_more_than_the_bound(known_table: str) -> None:
    """part c has 1 of its 50 rows deleted (2 %, below the 5 % rewrite rule); its one file with a DV holds half the
    partition's rows. On the pure-Python path that costs est. +25 % per full scan of part c, on the native scan
    about +11 %: a PURGE is recommended only where the estimate passes --max-read-overhead."""
    report = table_health(known_table, read_path="false", max_read_overhead=0.2)
    part_c = report.partitions.set_index("partition").loc["part=c"]
    assert part_c["est_full_scan_overhead"] == pytest.approx(0.5 * (1.49 + np.log10(2) * 0.04 - 1))
    purge = [r for r in report.recommendations if r.partition == "part=c"]
    assert [(r.action, r.rows_reclaimed, r.files_rewritten) for r in purge] == [("REORG PURGE", 1, 1)]
    assert "+25% per full scan (on the pure-Python path)" in purge[0].reason and "2.0%" in purge[0].reason
    assert purge[0].sql == f"REORG TABLE delta.`{known_table}` WHERE part = 'c' APPLY (PURGE)"
    assert part_c["action"] == "REORG PURGE"
    assert set(report.files.loc[report.files["partition"] == "part=c", "action"]) == {"REORG PURGE", ""}
    assert report.recommendations[-1] is purge[0]  # reclaims the fewest rows: ranked last
    native = table_health(known_table, read_path="true", max_read_overhead=0.2)
    assert native.partitions.set_index("partition").loc["part=c", "est_full_scan_overhead"] < 0.2
    assert not [r for r in native.recommendations if r.partition == "part=c"]
    assert native.partitions.set_index("partition").loc["part=c", "action"] == ""
    files = native.files.set_index("partition")
    assert set(files.loc["part=a", "action"]) == {"OPTIMIZE"} and set(files.loc["part=d", "action"]) == {""}


def test_health_command_text_json_png_html(known_table: str, tmp_path: Path) -> None:
    png, page = tmp_path / "health.png", tmp_path / "health.html"
    res = run_cli("health", known_table, "--plot", str(png), "--html", str(page))
    assert "46 of 400 physical rows (11.50%)" in res.out
    assert "REORG PURGE" in res.out and "OPTIMIZE" in res.out and f"pictures written to {png}" in res.out
    recs = res.out[res.out.index("Recommendations"):]
    assert recs.index("REORG PURGE") < recs.index("OPTIMIZE")  # ranked by rows reclaimed
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 20_000
    width, height = struct.unpack(">II", data[16:24])
    assert width > 1000 and height > 400
    text = page.read_text()
    assert "data:image/png;base64," in text and "REORG TABLE delta.`" in text and "part=b" in text
    assert "est. read cost" in res.out and "to run" in res.out
    # the console script ran once above; the other options in this process (``main``, the same exit-code handling)
    python = invoke("--conf", "spark.dvlake.scan.native=false", "health", known_table).out
    assert "(pure-Python read path: spark.dvlake.scan.native=false)" in python and "+0.25 s per query" in python
    doc = invoke("health", known_table, "--json").json()
    assert doc["summary"]["deleted_rows"] == 46 and doc["recommendations"][0]["rows_reclaimed"] == 25
    assert [v["live_dvs"] for v in doc["versions"]] == [h[1] for h in KNOWN["dv_history"]]
    assert len(doc["files"]) == 8 and doc["files"][0]["deleted_rows"] == 25 and "_dv_path" not in doc["files"][0]
    old = invoke("health", known_table, "--version", "2", "--json").json()
    assert old["summary"]["deleted_rows"] == 20 and old["summary"]["files_with_dv"] == 2


def _testdata_tables(testdata: Path) -> list[dict]:
    return json.loads((testdata / "MANIFEST.json").read_text())["tables"]


def test_health_matches_delta_spark_tables_row_counts(testdata: Path) -> None:
    """physical - deleted = the MANIFEST's row count, and the DV history matches a snapshot per version."""
    checked = 0
    for t in _testdata_tables(testdata):
        root = testdata / t["path"]
        if t.get("special_handling"):
            continue  # test-only DV names / templates: covered below
        report = table_health(str(root), history_versions=1000)
        assert report.summary["physical_rows"] - report.summary["deleted_rows"] == t["expected_latest"]["row_count"], t["name"]
        assert not report.problems, (t["name"], report.problems)
        for v, live_dvs, deleted in report.versions.itertuples(index=False, name=None):
            snap = Snapshot.load(str(root), version=v)
            assert (live_dvs, deleted) == (snap.dv_count(), int(snap.dv_cardinalities().sum())), (t["name"], v)
        checked += 1
    assert checked >= 4


def test_health_reports_missing_dv_files(testdata: Path) -> None:
    """delta-spark's test-only DV file names make the DVs unreadable: health says so and exits 1."""
    root = testdata / "table-with-dv-large"
    report = table_health(str(root))
    assert report.problems and all("is missing" in p.message for p in report.problems)
    res = run_cli("health", str(root), expect=1)
    assert "error: deletion vector file" in res.err and "is missing" in res.err


def test_health_detects_a_corrupt_dv_header(testdata: Path, tmp_path: Path) -> None:
    from tests.conftest import copy_table

    root = copy_table(testdata / "basic-dv-no-checkpoint", tmp_path / "t")
    report = table_health(str(root))
    assert not report.problems
    dv_file = Path(report.dv_files.loc[report.dv_files["live_dvs"] > 0, "dv_file"].iloc[0])
    data = bytearray(dv_file.read_bytes())
    struct.pack_into(">I", data, 1, 999)  # the size field of the DV at offset 1
    dv_file.write_bytes(bytes(data))
    problems = table_health(str(root)).problems
    assert len(problems) == 1 and "descriptor says 36 bytes, header says 999" in problems[0].message
    res = run_cli("dv", str(root), report.files.loc[report.files["has_dv"], "path"].iloc[0], expect=1)
    assert "size mismatch" in res.err and "Traceback" not in res.err


def test_stale_and_unreferenced_dv_files(testdata: Path) -> None:
    """15 DELETEs rewrote DVs: superseded DV files are stale (tombstoned or unreferenced)."""
    report = table_health(str(testdata / "dv-partitioned-with-checkpoint"))
    states = report.dv_files["state"].value_counts().to_dict()
    assert states["live"] == 2 and states.get("retained by tombstones", 0) + states.get("unreferenced", 0) == 13
    assert report.summary["dv_stale_bytes"] == int(report.dv_files.loc[report.dv_files["live_dvs"] == 0, "size_bytes"].sum())
    assert report.summary["dv_files_unreferenced"] == 13


def test_vacuum_is_recommended_only_for_what_vacuum_deletes_now(testdata: Path, tmp_path: Path) -> None:
    """health's VACUUM recommendation reclaims exactly the DV files `dvlake vacuum --dry-run` lists: none while
    they are younger than the retention (they are named as waiting instead), all of them once they are older."""
    from dvlake.commands.maintenance.vacuum import vacuum
    from tests.conftest import copy_table

    table = copy_table(testdata / "dv-partitioned-with-checkpoint", tmp_path / "t")
    report = table_health(str(table))  # every file was just copied: inside the 7-day retention
    assert not [r for r in report.recommendations if r.action == "VACUUM"]
    assert report.summary["dv_files_vacuumable"] == 0
    assert report.summary["dv_files_vacuumable_from_ms"] > time.time() * 1000 + 6 * 86_400_000
    res = run_cli("health", str(table))
    assert "dvlake vacuum" not in res.out and "Later: 13 DV file(s) no live file uses" in res.out

    old = time.time() - 30 * 86_400
    for p in [table, *table.rglob("*")]:
        os.utime(p, (old, old))
    listed = [p for p in vacuum(None, str(table), dry_run=True).paths if p.endswith(".bin")]
    assert listed  # the delta-spark tombstones are older than the retention too
    report = table_health(str(table))
    vac = [r for r in report.recommendations if r.action == "VACUUM"]
    assert len(vac) == 1 and vac[0].bytes_reclaimed == sum(os.path.getsize(p) for p in listed)
    assert report.summary["dv_files_vacuumable"] == len(listed)
    assert report.recommendations[-1].action == "VACUUM"  # reclaims no rows: ranked last


def test_health_scales_to_many_files(tmp_path: Path) -> None:
    """A 20,000-file synthetic log (4,000 DVs in one DV file) is reported in seconds (bench/health.py does 100,000)."""
    import time

    from bench.health import write_dv_file
    from bench.log_replay import build

    root = str(tmp_path / "t")
    build(root, 20_000, 20, 20, 200)
    write_dv_file(root, 200)
    t0 = time.perf_counter()
    report = table_health(root)
    elapsed = time.perf_counter() - t0
    assert report.summary["files"] == 20_000 and report.summary["files_with_dv"] == 4_000
    assert report.summary["deleted_rows"] == 8_000 and not report.problems
    assert len(report.partitions) == 100 and report.summary["max_dvs_per_dv_file"] == 200
    assert elapsed < 30, elapsed  # ~0.5 s on an idle 2-core machine; generous for a loaded CI box


def test_absolute_path_dv_of_the_special_char_table(testdata: Path, tmp_path: Path) -> None:
    """A 'p' DV (absolute URI, percent-encoded folder name) is found, stat'ed and header-checked like a 'u' one."""
    from tests.conftest import copy_table

    root = copy_table(testdata / "table-with-dv-special-char", tmp_path / "t")
    commit = root / "_delta_log" / "00000000000000000000.json"
    folder = f"{root.resolve()}/folder&with%25special%20char"
    commit.write_text(commit.read_text().replace("{{FOLDER_WITH_SPECIAL_CHAR}}", folder))
    report = table_health(str(root))
    assert not report.problems
    assert report.summary["dv_storage"] == {"in DV files by absolute path (p)": 1}
    assert report.summary["physical_rows"] - report.summary["deleted_rows"] == 5
    live = report.dv_files[report.dv_files["live_dvs"] == 1]
    assert len(live) == 1 and "folder&with%special char" in live["dv_file"].iloc[0] and live["size_bytes"].iloc[0] > 0


def test_partitions_under_column_mapping_use_logical_names(testdata: Path) -> None:
    """partitionValues are keyed by physical names under column mapping; the report shows the logical ones."""
    plain = table_health(str(testdata / "dv-partitioned-with-checkpoint")).partitions
    mapped = table_health(str(testdata / "dv-with-columnmapping")).partitions
    cols = ["partition", "files", "files_with_dv", "physical_rows", "deleted_rows"]
    assert len(mapped) == 10 and mapped[cols].values.tolist() == plain[cols].values.tolist()
    assert "part=__HIVE_DEFAULT_PARTITION__" not in set(mapped["partition"])


INLINE_DV = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"  # never decoded: health reads descriptors only


def _log_only_table(root: Path, partition_values: list[str | None]) -> None:
    """A log-only table: string partition `p`, one file per value with an inline DV of 5 of its 10 rows."""
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "p", "type": "string", "nullable": True, "metadata": {}}]}
    lines = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors"]}},
        {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
                      "partitionColumns": ["p"], "configuration": {"delta.enableDeletionVectors": "true"}}},
    ]
    for i, value in enumerate(partition_values):
        lines.append({"add": {"path": f"f{i}.parquet", "partitionValues": {"p": value}, "size": 100,
                              "modificationTime": 1, "dataChange": True, "stats": '{"numRecords":10}',
                              "deletionVector": {"storageType": "i", "pathOrInlineDv": INLINE_DV, "sizeInBytes": 40,
                                                 "cardinality": 5}}})
    log = root / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_predicates_quote_awkward_partition_values(tmp_path: Path) -> None:
    """Values with '/', '=' and quotes, and null partitions, give exact SQL predicates (no key re-parsing)."""
    root = tmp_path / "t"
    _log_only_table(root, ["a/b=c'd", "a/b=c'd", None])
    report = table_health(str(root))
    assert report.summary["dv_storage"] == {"inline (i)": 3} and not report.problems
    by_part = {r.partition: r for r in report.recommendations}
    assert by_part["p=a/b=c'd"].sql == f"OPTIMIZE delta.`{root}` WHERE p = 'a/b=c\\'d'"
    assert by_part["p=a/b=c'd"].rows_reclaimed == 10 and by_part["p=a/b=c'd"].files_rewritten == 2
    assert by_part["p=__HIVE_DEFAULT_PARTITION__"].sql == f"REORG TABLE delta.`{root}` WHERE p IS NULL APPLY (PURGE)"
    assert by_part["p=__HIVE_DEFAULT_PARTITION__"].command == f'dvlake purge "{root}" --where "p IS NULL"'
