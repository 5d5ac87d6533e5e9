"""A large read's native-scan listing as a file the plan names, not as text inside the plan.

The native scan must know each planned file's DV. Inline (``dvlake.scan.files``) that is ~215 bytes per file in the
logical plan: 21.5 MB at 100,000 files, parsed again whenever the query plans and, over Spark Connect, sent by the
client with every plan (BENCHMARKS.md, "Native scan: the DV listing in the plan"). Above
``spark.dvlake.scan.inlineListingMaxFiles`` files (default ``DEFAULT_INLINE_MAX``) the same lines go into one gzip'd
file, sorted by path, under a name that is the SHA-256 of its bytes; the plan carries only
``location \\t sha256 \\t entries`` (``native_jar.LISTING_OPTION``) and each executor JVM reads, checks and caches it
once (``ScanListings.java``).

Where: ``spark.dvlake.scan.listingDir`` when the session sets it (any folder the driver's storage can write and every
executor's Hadoop FileSystem can read), else ``<table>/_delta_log/_dvlake/scan/``: beside the table, so it works on a
cluster and over Connect (the client writes it through dvlake's ``Storage``, as it reads the log), in a folder other
Delta readers ignore (they parse only ``_delta_log``'s own commit and checkpoint names), and which VACUUM never walks
(it skips ``_delta_log``). The name is the content's digest: the same read of the same version writes nothing the
second time, and a file cannot be replaced by other content under the name a plan holds without the executors'
digest check failing (``ScanListingError``). A store dvlake cannot write (a read-only table) keeps the inline listing.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
from dataclasses import dataclass
from urllib.parse import quote

from pyspark.sql import SparkSession

from dvlake.config import INLINE_LISTING_MAX_FILES, LISTING_DIR
from dvlake.errors import DvlakeError, InvalidArgumentError
from dvlake.log.cleanup import SCAN_LISTINGS_SUBDIR
from dvlake.native_jar import SCAN_PROTOCOL
from dvlake.storage import storage_for
from dvlake.storage.confine import normalize_location

log = logging.getLogger(__name__)

#: The listing file's first word (``ScanListings.MAGIC`` in Java; the seam test keeps them equal).
MAGIC = "dvlake-scan-listing"
#: Reads of up to this many files keep the inline listing: a few KB in the plan, and no file to write or read.
DEFAULT_INLINE_MAX = 1000
#: The folder under the table root, inside ``_delta_log`` where no Delta reader or VACUUM looks (log cleanup removes
#: listings older than the log's retention).
TABLE_SUBDIR = SCAN_LISTINGS_SUBDIR


@dataclass(frozen=True)
class ListingRef:
    """A written listing file: where it is, the SHA-256 of its bytes and how many files it names."""

    location: str
    sha256: str
    entries: int

    def option(self) -> str:
        """The value of ``native_jar.LISTING_OPTION``."""
        return f"{quote(self.location, safe='')}\t{self.sha256}\t{self.entries}"


def inline_max(spark: SparkSession) -> int:
    """The session's ``spark.dvlake.scan.inlineListingMaxFiles`` (a whole number; 0 puts every listing in a file)."""
    value = str(spark.conf.get(INLINE_LISTING_MAX_FILES, "") or "").strip()
    if not value:
        return DEFAULT_INLINE_MAX
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise InvalidArgumentError(f"{INLINE_LISTING_MAX_FILES} must be a whole number of files (0 or more), not "
                                   f"{value!r}")
    return number


def listing_dir(spark: SparkSession, table_root: str) -> str:
    """The folder the listing files of ``table_root`` go to."""
    chosen = str(spark.conf.get(LISTING_DIR, "") or "").strip()
    return normalize_location(chosen) if chosen else normalize_location(f"{table_root.rstrip('/')}/{TABLE_SUBDIR}")


def encode(lines: list[str]) -> bytes:
    """The file's bytes: header, then ``lines`` sorted (by path, their first field); gzip without a time stamp, so the
    same listing always has the same digest and so the same name."""
    ordered = sorted(lines)
    text = f"{MAGIC} {SCAN_PROTOCOL} {len(ordered)}\n" + "\n".join(ordered)
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)


def write(spark: SparkSession, table_root: str, lines: list[str]) -> ListingRef | None:
    """``lines`` (the inline listing's) written once under their digest; None when it cannot be written (the caller
    keeps the inline listing: slower to plan, same rows)."""
    data = encode(lines)
    digest = hashlib.sha256(data).hexdigest()
    folder = listing_dir(spark, table_root)
    location = f"{folder}/{digest}.listing.gz"
    storage = storage_for(folder)
    try:
        # the name is the digest: a file of the same size there is this listing (the executors check the digest); one
        # of another size is a torn or foreign write, replaced whole
        known = storage.stat(location)
        if known is None or known.size != len(data):
            storage.makedirs(folder)
            storage.write(location, data)
    except (OSError, DvlakeError) as exc:
        log.warning("dvlake: cannot write the scan listing to %s (%s); the listing stays inline in the plan", location,
                    exc)
        return None
    return ListingRef(location, digest, len(lines))
