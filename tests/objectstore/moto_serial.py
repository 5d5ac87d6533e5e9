"""moto's S3 server with its requests served one at a time: ``python -m tests.objectstore.moto_serial HOST PORT``.

moto checks ``If-None-Match: *`` and then stores the object as two steps of a threaded server, so two PUTs racing
for one key could both pass the check: a race S3 itself never loses. Serving one request at a time (a lock around
the WSGI app; connections stay keep-alive) makes the emulator keep S3's guarantee, so a lost commit in the tests can
only be dvlake's.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.threaded_moto_server import MotoRequestHandler
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


class Serialized:
    """A WSGI app that runs ``app`` for one request at a time (moto's responses are built whole, not streamed)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            return list(self.app(environ, start_response))


def main(host: str, port: int) -> None:
    run_simple(host, port, Serialized(DomainDispatcherApplication(create_backend_app)), threaded=True,
               request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
