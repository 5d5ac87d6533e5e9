"""Emulator fixtures of the object-store tests: one server per store kind for the whole run."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dvlake.storage import objectstore
from tests.objectstore.servers import Emulator, azurite, azurite_container, moto_bucket, moto_s3

BUCKET = "dvlake-tests"


@dataclass
class Store:
    """One emulated store: ``root()`` names a fresh table on it; ``env`` lets a child process reach it."""

    kind: str
    env: dict[str, str]
    new_root: Callable[[str], str]

    def root(self, scheme: str | None = None) -> str:
        return self.new_root(scheme or "")


def _configure_in_process(kind: str, emulator: Emulator) -> None:
    """This process reaches the emulator through ``objectstore.configure`` (child processes through ``env``)."""
    if kind == "s3":
        objectstore.configure("s3", {"endpoint": emulator.env["AWS_ENDPOINT"], "region": "us-east-1",
                                     "access_key_id": "dvlake", "secret_access_key": "dvlake"}, {"allow_http": True})
    else:
        objectstore.configure("azure", {"endpoint": emulator.env["AZURE_STORAGE_ENDPOINT"],
                                        "account_name": emulator.env["AZURE_STORAGE_ACCOUNT_NAME"]},
                              {"allow_http": True}, {emulator.env["AZURE_STORAGE_ACCOUNT_NAME"]:
                                                     emulator.env["AZURE_STORAGE_ACCOUNT_KEY"]})


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with moto_s3(tmp_path_factory.mktemp("moto")) as emulator:
        moto_bucket(emulator, BUCKET)
        _configure_in_process("s3", emulator)
        yield Store("s3", emulator.env, lambda scheme: f"{scheme or 's3'}://{BUCKET}/{uuid.uuid4().hex}")
    objectstore.reset_configuration()


@pytest.fixture(scope="session")
def azure_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with azurite(tmp_path_factory.mktemp("azurite")) as emulator:
        azurite_container(emulator, BUCKET)
        _configure_in_process("azure", emulator)
        account = emulator.env["AZURE_STORAGE_ACCOUNT_NAME"]

        def new_root(scheme: str) -> str:
            name = uuid.uuid4().hex
            if scheme in ("abfs", "abfss"):
                return f"{scheme}://{BUCKET}@{account}.dfs.core.windows.net/{name}"
            return f"az://{BUCKET}/{name}"

        yield Store("azure", emulator.env, new_root)
    objectstore.reset_configuration()


@pytest.fixture(params=["s3", "azure"])
def store(request: pytest.FixtureRequest) -> Store:
    """Each test runs once per emulated store."""
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture(params=[("s3", "s3a"), ("azure", "abfss"), ("s3", "s3"), ("azure", "az")], ids=lambda p: p[1])
def store_root(request: pytest.FixtureRequest) -> tuple[Store, str]:
    """A fresh table root under each URI scheme of each emulated store, with its store."""
    kind, scheme = request.param
    store: Store = request.getfixturevalue(f"{kind}_store")
    return store, store.root(scheme)


def child_env(store: Store) -> dict[str, str]:
    """A child process's environment: the emulator's settings, and this checkout first on the path."""
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, **store.env, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    return env
