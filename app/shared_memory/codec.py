"""Value codec (pure): gzip above a threshold, SHA-256 of the original bytes, verify on read.

The checksum is always over the *original* bytes, so it proves the round trip through
compression too. Decoding never returns bytes whose hash differs: it raises IntegrityError.
gzip level 1 by default: for JSON/text it still shrinks 3-5x and keeps a 1 MB write within
the 20 ms budget (level 6 costs ~3x the CPU for a few % more).
"""

import hashlib
import zlib
from dataclasses import dataclass

from app.shared_memory.errors import IntegrityError

DEFAULT_COMPRESS_THRESHOLD = 1024 * 1024  # strictly over 1 MB is compressed
DEFAULT_GZIP_LEVEL = 1


@dataclass(frozen=True, slots=True)
class Encoded:
    stored: bytes  # what goes to the durable store
    compressed: bool
    sha256: str  # hex digest of the original bytes
    size: int  # original size in bytes


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _gzip(data: bytes, level: int) -> bytes:
    # zlib with wbits=31 writes a gzip member without a timestamp: deterministic output.
    comp = zlib.compressobj(level, zlib.DEFLATED, 31)
    return comp.compress(data) + comp.flush()


def encode(
    data: bytes,
    *,
    threshold: int = DEFAULT_COMPRESS_THRESHOLD,
    level: int = DEFAULT_GZIP_LEVEL,
) -> Encoded:
    """Hash `data` and gzip it when it is larger than `threshold` bytes."""
    digest = sha256_hex(data)
    if len(data) > threshold:
        return Encoded(_gzip(data, level), True, digest, len(data))
    return Encoded(data, False, digest, len(data))


def _gunzip(stored: bytes, size: int) -> bytes:
    # Bounded: a corrupted or hostile row can never inflate past its recorded size (+1 to
    # notice that it tried).
    d = zlib.decompressobj(31)
    try:
        out = d.decompress(stored, size + 1)
    except zlib.error as exc:
        raise IntegrityError(
            "stored value is not valid gzip", details={"reason": str(exc)}
        ) from exc
    if len(out) > size or not d.eof:
        raise IntegrityError("stored value inflates to the wrong size")
    return out


def decode(stored: bytes, *, compressed: bool, sha256: str, size: int) -> bytes:
    """Return the original bytes, raising IntegrityError if they do not hash to `sha256`."""
    data = _gunzip(stored, size) if compressed else stored
    verify(data, sha256)
    return data


def verify(data: bytes, sha256: str) -> None:
    """Raise IntegrityError unless `data` hashes to `sha256`."""
    actual = sha256_hex(data)
    if actual != sha256:
        raise IntegrityError(
            "stored value does not match its SHA-256 checksum",
            details={"expected": sha256, "actual": actual},
        )
