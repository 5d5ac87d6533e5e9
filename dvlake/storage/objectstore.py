"""S3, GCS and Azure through ``obstore``, committing with each store's own create-only write.

Why obstore (the Python face of the Rust ``object_store`` crate delta-rs commits with): one library covers
the three stores, its ``put(..., mode="create")`` is exactly the primitive Delta needs (S3 ``PutObject`` with
``If-None-Match: *``, GCS ``x-goog-if-generation-match: 0``, Azure ``If-None-Match: *``) and answers a lost race
with one typed error (``AlreadyExistsError``), it reads the usual ``AWS_*`` / ``GOOGLE_*`` / ``AZURE_*``
environment on every node, and it ships as one wheel without Python dependencies.

What goes through here and how:

* commits, checkpoint parts and UniForm's ``vN.metadata.json`` (``write_if_absent``): a create-only PUT;
* ``_last_checkpoint``, ``version-hint.text`` and other rewritable files (``write``): one whole-object PUT, which
  object stores make visible atomically, so no temp file and no rename is needed;
* DV files and other streamed writes (``open_output``): an upload that becomes visible only when closed;
* deletes (log cleanup, VACUUM, staging folders): batched where the store has a batch call.

Nothing here renames: ``move`` is a server-side copy and a delete, used only for freshly written files with unique
names that no reader sees before a commit names them (see ``move``).
"""

from __future__ import annotations

import io
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast
from urllib.parse import urlparse

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, GenericError, NotSupportedError

from dvlake.errors import CommitPrimitiveUnavailableError, InvalidArgumentError, ObjectStoreConfigurationError
from dvlake.storage.base import FileInfo, LogStore, RandomAccessFile, Storage
from dvlake.storage.paths import OBJECT_STORE_SCHEMES

log = logging.getLogger(__name__)
#: URI schemes this module serves, by store kind.
SCHEMES = OBJECT_STORE_SCHEMES
SINGLE_WRITER_ENV = "DVLAKE_SINGLE_WRITER"
#: deletes sent per batch request (S3's DeleteObjects takes at most 1000 keys).
DELETE_BATCH = 1000


@dataclass(frozen=True)
class Location:
    """Where a table root lives: ``base`` is the URI prefix of the bucket/container (keys are relative to it)."""

    scheme: str
    kind: str
    base: str
    bucket: str
    account: str | None = None


def parse_location(uri: str) -> Location:
    """The bucket (or container and account) of an ``s3://``, ``s3a://``, ``gs://``, ``abfs[s]://`` or ``az://`` URI.

    ``abfs[s]://container@account.dfs.core.windows.net/…`` names the account; ``az://container/…`` leaves it
    to the configuration (``AZURE_STORAGE_ACCOUNT_NAME``).
    """
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme not in SCHEMES or not parsed.netloc:
        raise InvalidArgumentError(f"{uri!r} is not an object-store URI dvlake commits to "
                                   f"(expected one of {', '.join(s + '://bucket/…' for s in SCHEMES)})")
    kind = SCHEMES[scheme]
    base = f"{parsed.scheme}://{parsed.netloc}"
    if kind == "azure" and "@" in parsed.netloc:
        container, host = parsed.netloc.split("@", 1)
        return Location(scheme, kind, base, container, host.split(".", 1)[0])
    return Location(scheme, kind, base, parsed.netloc)


# -- configuration -------------------------------------------------------------------------------------------


@dataclass
class StoreOptions:
    """Settings for one store kind beyond what obstore reads from the environment by itself."""

    config: dict[str, str] = field(default_factory=dict)
    client_options: dict[str, Any] = field(default_factory=dict)
    #: Azure account keys by account name (Hadoop's ``fs.azure.account.key.<account>.dfs.core.windows.net``)
    account_keys: dict[str, str] = field(default_factory=dict)


_OPTIONS: dict[str, StoreOptions] = {}
_OPTIONS_LOCK = threading.Lock()


def configure(kind: str, config: Mapping[str, str] | None = None, client_options: Mapping[str, Any] | None = None,
              account_keys: Mapping[str, str] | None = None) -> None:
    """Add settings for every table on one kind of store (``"s3"``, ``"gcs"`` or ``"azure"``) in this process.

    ``config`` takes obstore's keys (``endpoint``, ``region``, ``access_key_id``, ``account_name``, …) and overrides
    the environment; ``client_options`` obstore's HTTP options (``allow_http``, ``timeout``). Executors are separate
    processes: give them the environment (``spark.executorEnv.AWS_ENDPOINT`` …) or call this there too.

    Example:
        >>> configure("s3", {"endpoint": "http://127.0.0.1:9000", "region": "us-east-1"}, {"allow_http": True})
    """
    if kind not in set(SCHEMES.values()):
        raise InvalidArgumentError(f"unknown object-store kind {kind!r}; expected s3, gcs or azure")
    with _OPTIONS_LOCK:
        opts = _OPTIONS.setdefault(kind, StoreOptions())
        opts.config.update(config or {})
        opts.client_options.update(client_options or {})
        opts.account_keys.update(account_keys or {})
    _STORES.clear()


def reset_configuration() -> None:
    """Forget every ``configure`` call and cached client (tests start clean with it)."""
    with _OPTIONS_LOCK:
        _OPTIONS.clear()
    _STORES.clear()
    _PROBED.clear()


_AZURE_KEY_PREFIX = "fs.azure.account.key."


def options_from_hadoop(conf: Mapping[str, str]) -> dict[str, StoreOptions]:
    """The obstore settings that Spark's ``spark.hadoop.fs.*`` / Hadoop ``fs.*`` keys mean, per store kind.

    Mapped: S3A's access/secret key, session token, endpoint (with ``fs.s3a.connection.ssl.enabled``), region and
    path-style access; Azure's per-account keys; the GCS connector's service-account key file. Other keys (credential
    providers, committers, retries) have no one-to-one meaning here and are left to the environment.
    """
    get = {k.removeprefix("spark.hadoop."): v for k, v in conf.items()}.get
    out: dict[str, StoreOptions] = {}
    s3 = StoreOptions()
    for hadoop_key, key in (("fs.s3a.access.key", "access_key_id"), ("fs.s3a.secret.key", "secret_access_key"),
                            ("fs.s3a.session.token", "token"), ("fs.s3a.endpoint.region", "region")):
        value = get(hadoop_key)
        if value:
            s3.config[key] = value
    endpoint = get("fs.s3a.endpoint")
    if endpoint:
        ssl = (get("fs.s3a.connection.ssl.enabled") or "true").lower() != "false"
        s3.config["endpoint"] = endpoint if "://" in endpoint else f"{'https' if ssl else 'http'}://{endpoint}"
        if s3.config["endpoint"].startswith("http://"):
            s3.client_options["allow_http"] = True
    path_style = get("fs.s3a.path.style.access")
    if path_style is not None:
        s3.config["virtual_hosted_style_request"] = "false" if path_style.lower() == "true" else "true"
    if s3.config or s3.client_options:
        out["s3"] = s3
    azure = StoreOptions()
    for key, value in conf.items():
        key = key.removeprefix("spark.hadoop.")
        if key.startswith(_AZURE_KEY_PREFIX) and value:
            azure.account_keys[key[len(_AZURE_KEY_PREFIX):].split(".", 1)[0]] = value
    if azure.account_keys:
        out["azure"] = azure
    keyfile = get("google.cloud.auth.service.account.json.keyfile") or get("fs.gs.auth.service.account.json.keyfile")
    if keyfile:
        out["gcs"] = StoreOptions(config={"service_account_path": keyfile})
    return out


def configure_from_hadoop(conf: Mapping[str, str]) -> None:
    """``configure`` each store kind from Spark/Hadoop keys (see ``options_from_hadoop``)."""
    for kind, opts in options_from_hadoop(conf).items():
        configure(kind, opts.config, opts.client_options, opts.account_keys)


_STORES: dict[str, Any] = {}
_ENV_PREFIX = {"s3": "AWS", "gcs": "GOOGLE", "azure": "AZURE"}
_ENDPOINT_KEYS = {"s3": ("endpoint", "AWS_ENDPOINT", "AWS_ENDPOINT_URL"), "gcs": ("base_url", "GOOGLE_BASE_URL"),
                  "azure": ("endpoint", "AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")}


def _allows_http(kind: str, config: Mapping[str, str]) -> bool:
    """Plain HTTP only when asked for: ``<AWS|GOOGLE|AZURE>_ALLOW_HTTP=true``, or an endpoint spelled ``http://``.

    obstore reads its store settings from the environment but not its HTTP client's, so dvlake reads this one.
    """
    if os.environ.get(f"{_ENV_PREFIX[kind]}_ALLOW_HTTP", "").lower() in ("1", "true", "yes"):
        return True
    config_key, *env_keys = _ENDPOINT_KEYS[kind]
    endpoint = config.get(config_key) or next((os.environ[k] for k in env_keys if os.environ.get(k)), "")
    return endpoint.startswith("http://")


def _client(loc: Location) -> Any:
    """One obstore client per bucket and process (clients pool their HTTP connections)."""
    cached = _STORES.get(loc.base)
    if cached is not None:
        return cached
    with _OPTIONS_LOCK:
        opts = _OPTIONS.get(loc.kind, StoreOptions())
        config = dict(opts.config)
        client_options = dict(opts.client_options)
        account = loc.account or config.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "")
        key = opts.account_keys.get(account)
    if "allow_http" not in client_options and _allows_http(loc.kind, config):
        client_options["allow_http"] = True
    from obstore.store import AzureStore, GCSStore, S3Store

    store: Any
    try:
        if loc.kind == "s3":
            store = S3Store(loc.bucket, config=config, client_options=client_options)  # type: ignore[arg-type]
        elif loc.kind == "gcs":
            store = GCSStore(loc.bucket, config=config, client_options=client_options)  # type: ignore[arg-type]
        else:
            if loc.account:
                config.setdefault("account_name", loc.account)
            if key:
                config.setdefault("account_key", key)
            store = AzureStore(loc.bucket, config=config, client_options=client_options)  # type: ignore[arg-type]
    except BaseError as exc:
        raise ObjectStoreConfigurationError(
            f"cannot open {loc.base}: {str(exc).splitlines()[0]}. Set the store's environment variables on every node "
            f"({_ENV_PREFIX[loc.kind]}_*) or call dvlake.storage.objectstore.configure({loc.kind!r}, ...)") from None
    _STORES[loc.base] = store
    return store


# -- the commit primitive ------------------------------------------------------------------------------------

_PROBED: dict[str, bool] = {}


def _refuses_condition(exc: BaseException) -> bool:
    """Whether the store's answer says it does not implement the condition (rather than that the file exists)."""
    if isinstance(exc, NotSupportedError):
        return True
    text = str(exc).lower()
    return isinstance(exc, GenericError) and any(s in text for s in ("501 not implemented", "notimplemented"))


class CreateOnlyLogStore(LogStore):
    """Creates a commit with the store's conditional PUT: exactly one of two racing writers gets the version.

    Two cases need care beyond the PUT itself:

    * an answer lost on the wire: the client retries a PUT that did land, and the retry is refused because the
      object exists. The object then holds this writer's own bytes (every commit carries a fresh ``txnId``), so
      equal bytes mean success, never a lost race that would commit the same actions again one version later;
    * an S3-compatible store that ignores ``If-None-Match`` would let both writers "win". Before the first commit
      to a bucket, a probe creates one hidden object twice and requires the second create to be refused.
      A store that refuses the condition outright, or ignores it, gets ``CommitPrimitiveUnavailableError`` unless
      ``DVLAKE_SINGLE_WRITER=1`` declares a single writer (then exists-then-write, as for ``pyarrow.fs``).
    """

    def __init__(self, storage: ObjectStoreStorage) -> None:
        self._storage = storage

    def put_if_absent(self, path: str, data: bytes) -> None:
        storage = self._storage
        if not self._condition_honoured(path):
            self._single_writer_put(path, data, "ignores the create-only condition (If-None-Match: *)")
            return
        try:
            obstore.put(storage.client, storage.key(path), data, mode="create")
        except AlreadyExistsError:
            if self._holds(path, data):
                return  # our own PUT landed and its answer was lost; the retry saw our object
            raise FileExistsError(path) from None
        except (NotSupportedError, GenericError) as exc:
            if not _refuses_condition(exc):
                raise
            self._single_writer_put(path, data, f"answered the conditional write with: {str(exc).splitlines()[0]}")

    def _holds(self, path: str, data: bytes) -> bool:
        try:
            return self._storage.read_bytes(path) == data
        except FileNotFoundError:
            return False

    def _condition_honoured(self, path: str) -> bool:
        """S3-compatible stores only (GCS and Azure always honour theirs): probed once per bucket and process."""
        storage = self._storage
        if storage.location.kind != "s3":
            return True
        known = _PROBED.get(storage.location.base)
        if known is not None:
            return known
        probe = f"{path.rsplit('/', 1)[0]}/.dvlake-put-probe-{uuid.uuid4().hex}"
        key = storage.key(probe)
        try:
            obstore.put(storage.client, key, b"1", mode="create")
            try:
                obstore.put(storage.client, key, b"2", mode="create")
                honoured = False
            except AlreadyExistsError:
                honoured = True
        except (NotSupportedError, GenericError) as exc:
            if not _refuses_condition(exc):
                raise
            honoured = False
        finally:
            try:
                storage.delete(probe)
            except BaseError as exc:  # e.g. no delete permission: a hidden file readers skip, the verdict stands
                log.warning("could not delete the probe object %s: %s", probe, str(exc).splitlines()[0])
        _PROBED[storage.location.base] = honoured
        return honoured

    def _single_writer_put(self, path: str, data: bytes, why: str) -> None:
        if os.environ.get(SINGLE_WRITER_ENV, "").lower() not in ("1", "true", "yes"):
            raise CommitPrimitiveUnavailableError(
                f"cannot commit {path}: the store at {self._storage.location.base} {why}, so two concurrent writers "
                f"could both win one version and one commit would be lost. Use a store with conditional writes, or, "
                f"if only one process ever writes this table, set {SINGLE_WRITER_ENV}=1.")
        if self._storage.exists(path):
            raise FileExistsError(path)
        self._storage.write(path, data)


# -- the storage ---------------------------------------------------------------------------------------------


class _Reader(io.RawIOBase):
    """``open_input``'s reader: obstore's buffered range reader, giving ``bytes`` as Parquet and the log expect."""

    def __init__(self, reader: Any) -> None:
        super().__init__()
        self._reader = reader

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        if size is None or size < 0:
            return bytes(self._reader.readall())
        return bytes(self._reader.read(size))

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0, /) -> int:
        return int(self._reader.seek(offset, whence))

    def tell(self) -> int:
        return int(self._reader.tell())

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
        super().close()


class _Upload:
    """``open_output``'s writer: obstore's upload, visible under its name only once closed."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def write(self, data: Any) -> int:
        self._writer.write(data)
        return len(data)

    def close(self) -> None:
        self._writer.close()

    @property
    def closed(self) -> bool:
        return bool(self._writer.closed)

    def __enter__(self) -> _Upload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _info(path: str, meta: Mapping[str, Any]) -> FileInfo:
    etag = meta.get("e_tag")
    return FileInfo(path, int(meta["size"]), int(meta["last_modified"].timestamp() * 1000), str(etag) if etag else None)


class _SameClient:
    """A hashable stand-in for an obstore client (they are not hashable), equal only for the same client; it holds
    the client, so its id cannot be reused while a cache entry keys on it."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __hash__(self) -> int:
        return id(self.client)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SameClient) and other.client is self.client


class ObjectStoreStorage(Storage):
    """One bucket or container; locations keep their ``scheme://bucket`` prefix outside this class."""

    def __init__(self, location: Location, client: Any) -> None:
        self.location = location
        self.client = client
        self.log_store = CreateOnlyLogStore(self)

    def cache_identity(self) -> object | None:
        """The bucket's client: one per bucket while the settings stay, a new one after ``configure`` (another
        endpoint or credentials may answer the same URI from another store)."""
        return _SameClient(self.client)

    @classmethod
    def from_uri(cls, uri: str) -> ObjectStoreStorage:
        """The storage of the bucket ``uri`` lies in, configured from the environment and ``configure``."""
        loc = parse_location(uri)
        return cls(loc, _client(loc))

    def key(self, location: str) -> str:
        """The object key of a location in this bucket."""
        base = self.location.base
        if not location.startswith(base):
            raise InvalidArgumentError(f"{location!r} is not in {base}")
        return location[len(base):].strip("/")

    def _uri(self, key: str) -> str:
        return f"{self.location.base}/{key}"

    # -- reading -----------------------------------------------------------------------------------------------
    def open_input(self, path: str) -> RandomAccessFile:
        return cast(RandomAccessFile, _Reader(obstore.open_reader(self.client, self.key(path))))

    def read_bytes(self, path: str) -> bytes:
        return bytes(obstore.get(self.client, self.key(path)).bytes())

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """One ranged GET (a DV read is one request); a range running past the end returns the rest of the file."""
        if length <= 0:
            return b""
        try:
            return bytes(obstore.get_range(self.client, self.key(path), start=offset, length=length))
        except FileNotFoundError:
            raise
        except BaseError:  # a range starting at or after the end is an error to the store, an empty read to us
            info = self.stat(path)
            if info is not None and offset >= info.size:
                return b""
            raise

    def stat(self, path: str) -> FileInfo | None:
        try:
            meta = obstore.head(self.client, self.key(path))
        except FileNotFoundError:
            return None
        return _info(path, meta)

    def exists(self, path: str) -> bool:
        """A file, or a "folder": any object below the prefix."""
        if self.stat(path) is not None:
            return True
        prefix = self.key(path) + "/"
        for chunk in obstore.list(self.client, prefix, chunk_size=1):
            if chunk:
                return True
        return False

    def list_dir(self, path: str) -> list[FileInfo]:
        prefix = self.key(path)
        listing = obstore.list_with_delimiter(self.client, prefix + "/" if prefix else None)
        return [_info(self._uri(m["path"]), m) for m in listing["objects"]]

    def walk(self, path: str) -> Iterator[FileInfo]:
        prefix = self.key(path)
        for chunk in obstore.list(self.client, prefix + "/" if prefix else None):
            for m in chunk:
                yield _info(self._uri(m["path"]), m)

    # -- writing -----------------------------------------------------------------------------------------------
    def write(self, path: str, data: bytes) -> None:
        """One PUT of the whole object: readers see the old or the new bytes, never a part (no temp file)."""
        obstore.put(self.client, self.key(path), data, mode="overwrite")

    def open_output(self, path: str) -> IO[bytes]:
        return cast(IO[bytes], _Upload(obstore.open_writer(self.client, self.key(path))))

    def makedirs(self, path: str) -> None:
        return None  # no folders: a prefix exists once an object below it does

    def move(self, src: str, dst: str) -> None:
        """A server-side copy, then a delete of the source: not atomic, and nothing relies on it being so.

        Only freshly written data files move (out of the staging folder, to a unique name no commit names yet);
        a crash between the two steps leaves an unreferenced copy that VACUUM removes.
        """
        obstore.copy(self.client, self.key(src), self.key(dst))
        self.delete(src)

    def delete(self, path: str) -> None:
        try:
            obstore.delete(self.client, self.key(path))
        except FileNotFoundError:
            pass

    def delete_many(self, paths: Sequence[str]) -> None:
        """Batched deletes (S3 ``DeleteObjects``, Azure's batch API), absent files ignored."""
        keys = [self.key(p) for p in paths]
        for i in range(0, len(keys), DELETE_BATCH):
            batch = keys[i:i + DELETE_BATCH]
            try:
                obstore.delete(self.client, batch)
            except FileNotFoundError:  # a batch fails whole on one absent key on some stores: redo it one by one
                for k in batch:
                    self.delete(self._uri(k))

    def delete_dir(self, path: str) -> None:
        self.delete_many([f.path for f in self.walk(path)])
