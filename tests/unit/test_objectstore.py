"""The object-store storage without a server: URI parsing, Spark/Hadoop settings, and the commit primitive's rules
on obstore's in-memory store (which honours ``mode="create"`` like S3, GCS and Azure do).

The GCS store is tested here only (and in test_storage.py's race of 16 writers): no installable GCS emulator serves
the XML-API PUT that obstore's GCS client commits with (see tests/objectstore/servers.py), so its create-only commit
runs against this fake.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import obstore
import pytest
from obstore.exceptions import NotSupportedError
from obstore.store import MemoryStore

from dvlake.errors import CommitPrimitiveUnavailableError, InvalidArgumentError, ObjectStoreConfigurationError
from dvlake.storage import objectstore, storage_for
from dvlake.storage.objectstore import (
    SINGLE_WRITER_ENV,
    Location,
    ObjectStoreStorage,
    options_from_hadoop,
    parse_location,
)


@pytest.fixture(autouse=True)
def clean_configuration() -> Iterator[None]:
    objectstore.reset_configuration()
    yield
    objectstore.reset_configuration()


def fake(kind: str = "gcs", scheme: str = "gs") -> tuple[str, ObjectStoreStorage]:
    base = f"{scheme}://bucket"
    return f"{base}/t", ObjectStoreStorage(Location(scheme, kind, base, "bucket"), MemoryStore())


def test_locations_of_each_scheme() -> None:
    assert parse_location("s3://b/t/x") == Location("s3", "s3", "s3://b", "b")
    assert parse_location("s3a://b/t") == Location("s3a", "s3", "s3a://b", "b")
    assert parse_location("gs://b/t") == Location("gs", "gcs", "gs://b", "b")
    assert parse_location("abfss://c@acct.dfs.core.windows.net/t") == \
        Location("abfss", "azure", "abfss://c@acct.dfs.core.windows.net", "c", "acct")
    assert parse_location("az://c/t") == Location("az", "azure", "az://c", "c", None)
    with pytest.raises(InvalidArgumentError, match="hdfs"):
        parse_location("hdfs://nn/t")


def test_storage_for_sends_object_store_schemes_here() -> None:
    for root in ("s3://b/t", "s3a://b/t", "gs://b/t"):
        s = storage_for(root)
        assert isinstance(s, ObjectStoreStorage) and s.log_store.is_safe_for_concurrent_writers
        assert s.key(f"{root}/_delta_log/00000000000000000000.json") == "t/_delta_log/00000000000000000000.json"


def test_an_unreachable_account_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME", raising=False)
    with pytest.raises(ObjectStoreConfigurationError, match=r"az://c: .*Account must be specified.*AZURE_\*"):
        storage_for("az://c/t")


def test_hadoop_settings_map_to_the_stores_own() -> None:
    opts = options_from_hadoop({
        "spark.hadoop.fs.s3a.access.key": "AK", "spark.hadoop.fs.s3a.secret.key": "SK",
        "spark.hadoop.fs.s3a.endpoint": "minio:9000", "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.path.style.access": "true", "fs.s3a.endpoint.region": "eu-west-1",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "KEY",
        "spark.hadoop.google.cloud.auth.service.account.json.keyfile": "/k.json",
        "spark.sql.shuffle.partitions": "4"})
    assert opts["s3"].config == {"access_key_id": "AK", "secret_access_key": "SK", "region": "eu-west-1",
                                 "endpoint": "http://minio:9000", "virtual_hosted_style_request": "false"}
    assert opts["s3"].client_options == {"allow_http": True}
    assert opts["azure"].account_keys == {"acct": "KEY"}
    assert opts["gcs"].config == {"service_account_path": "/k.json"}
    assert options_from_hadoop({"spark.sql.shuffle.partitions": "4"}) == {}


def test_same_behaviour_as_the_other_storages() -> None:
    root, s = fake()
    s.write(f"{root}/d/a.bin", b"0123456789")
    s.write(f"{root}/d/sub/b.bin", b"xy")
    assert s.read_bytes(f"{root}/d/a.bin") == b"0123456789"
    assert s.read_range(f"{root}/d/a.bin", 3, 4) == b"3456"
    assert s.read_range(f"{root}/d/a.bin", 8, 10) == b"89"
    with s.open_input(f"{root}/d/a.bin") as f:  # type: ignore[attr-defined]
        f.seek(2)
        assert f.read(3) == b"234" and f.tell() == 5 and f.read() == b"56789"
    info = s.stat(f"{root}/d/a.bin")
    assert info is not None and info.size == 10 and info.path == f"{root}/d/a.bin"
    assert s.stat(f"{root}/d/missing") is None
    assert [i.path for i in s.list_dir(f"{root}/d")] == [f"{root}/d/a.bin"]
    assert sorted(i.path for i in s.walk(f"{root}/d")) == [f"{root}/d/a.bin", f"{root}/d/sub/b.bin"]
    assert s.list_dir(f"{root}/absent") == [] and list(s.walk(f"{root}/absent")) == []
    assert s.exists(f"{root}/d") and s.exists(f"{root}/d/a.bin") and not s.exists(f"{root}/e")
    s.move(f"{root}/d/a.bin", f"{root}/e/a.bin")
    assert not s.exists(f"{root}/d/a.bin") and s.read_bytes(f"{root}/e/a.bin") == b"0123456789"
    with s.open_output(f"{root}/f/c.bin") as out:
        out.write(b"abc")
        assert s.stat(f"{root}/f/c.bin") is None  # an upload is invisible until closed
    assert s.read_bytes(f"{root}/f/c.bin") == b"abc"
    s.delete(f"{root}/f/c.bin")
    s.delete(f"{root}/f/c.bin")  # absent: not an error
    s.delete_many([f"{root}/e/a.bin", f"{root}/nothing-here"])
    assert not s.exists(f"{root}/e")
    s.delete_dir(f"{root}/d")
    assert list(s.walk(root)) == []
    with pytest.raises(FileNotFoundError):
        s.read_bytes(f"{root}/d/a.bin")


def test_a_retry_that_finds_its_own_commit_is_a_win_and_another_is_a_loss() -> None:
    """A PUT that landed but whose answer was lost is retried by the client and refused: the object holds
    our bytes, so the commit stands (rebasing would commit the same actions twice)."""
    root, s = fake()
    path = f"{root}/_delta_log/00000000000000000001.json"
    obstore.put(s.client, s.key(path), b"ours, txnId 1")  # the first, lost-answer PUT
    s.write_if_absent(path, b"ours, txnId 1")
    with pytest.raises(FileExistsError):
        s.write_if_absent(path, b"theirs, txnId 2")
    assert s.read_bytes(path) == b"ours, txnId 1"


def test_a_store_refusing_the_condition_needs_a_declared_single_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    root, s = fake()
    real_put = obstore.put

    def put(store: Any, key: str, data: Any, *, mode: str = "overwrite", **kw: Any) -> Any:
        if mode == "create":
            raise NotSupportedError("conditional put not supported by this store")
        return real_put(store, key, data, mode=mode, **kw)

    monkeypatch.setattr(obstore, "put", put)
    monkeypatch.delenv(SINGLE_WRITER_ENV, raising=False)
    path = f"{root}/_delta_log/00000000000000000000.json"
    with pytest.raises(CommitPrimitiveUnavailableError, match=rf"gs://bucket answered .*not supported.*{SINGLE_WRITER_ENV}=1"):
        s.write_if_absent(path, b"{}")
    assert s.stat(path) is None
    monkeypatch.setenv(SINGLE_WRITER_ENV, "1")
    s.write_if_absent(path, b"{}")
    with pytest.raises(FileExistsError):
        s.write_if_absent(path, b"{}")


def test_an_s3_store_ignoring_if_none_match_is_found_by_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    root, s = fake("s3", f"s3-{uuid.uuid4().hex[:6]}")
    real_put = obstore.put
    monkeypatch.setattr(obstore, "put", lambda store, key, data, **kw: real_put(store, key, data))  # drops the mode
    monkeypatch.delenv(SINGLE_WRITER_ENV, raising=False)
    path = f"{root}/_delta_log/00000000000000000000.json"
    with pytest.raises(CommitPrimitiveUnavailableError, match=r"ignores the create-only condition"):
        s.write_if_absent(path, b"{}")
    assert list(s.walk(root)) == []  # the probe cleaned up and nothing was committed
    monkeypatch.setattr(obstore, "put", real_put)  # the verdict is kept per bucket and process
    with pytest.raises(CommitPrimitiveUnavailableError):
        s.write_if_absent(path, b"{}")


def test_an_s3_store_honouring_the_condition_passes_the_probe_once() -> None:
    root, s = fake("s3", "s3")
    s.write_if_absent(f"{root}/_delta_log/00000000000000000000.json", b"{}")
    assert objectstore._PROBED == {"s3://bucket": True}
    with pytest.raises(FileExistsError):
        s.write_if_absent(f"{root}/_delta_log/00000000000000000000.json", b"{other}")
    assert [i.path for i in s.walk(root)] == [f"{root}/_delta_log/00000000000000000000.json"]


def test_a_sessions_hadoop_settings_reach_the_stores_once() -> None:
    from dvlake.spark.object_stores import configure_object_stores

    class Conf:
        reads = 0

        @property
        def getAll(self) -> dict[str, str]:  # noqa: N802 - PySpark's name
            Conf.reads += 1
            return {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9", "spark.app.name": "x"}

    class Session:
        conf = Conf()

    session = Session()
    configure_object_stores(session)
    configure_object_stores(session)
    assert Conf.reads == 1
    assert objectstore._OPTIONS["s3"].config == {"endpoint": "http://127.0.0.1:9"}
    assert objectstore._OPTIONS["s3"].client_options == {"allow_http": True}


def test_ranged_reads_at_and_past_the_end() -> None:
    root, s = fake()
    s.write(f"{root}/a.bin", b"0123456789")
    assert s.read_range(f"{root}/a.bin", 0, 10) == b"0123456789"
    assert s.read_range(f"{root}/a.bin", 9, 5) == b"9"
    assert s.read_range(f"{root}/a.bin", 10, 5) == b""
    assert s.read_range(f"{root}/a.bin", 3, 0) == b""
    with pytest.raises(FileNotFoundError):
        s.read_range(f"{root}/missing.bin", 0, 4)


def test_only_a_not_implemented_answer_means_the_condition_is_refused() -> None:
    from obstore.exceptions import GenericError

    from dvlake.storage.objectstore import _refuses_condition

    assert _refuses_condition(NotSupportedError("no"))
    assert _refuses_condition(GenericError("Server returned non-2xx status code: 501 Not Implemented: "))
    assert _refuses_condition(GenericError("<Code>NotImplemented</Code>"))
    assert not _refuses_condition(GenericError("Server returned non-2xx status code: 503 Slow Down, request 5012"))
    assert not _refuses_condition(ValueError("501 Not Implemented"))
