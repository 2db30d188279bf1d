"""Value codec: gzip threshold, checksum, integrity errors."""

import os
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.shared_memory.codec import decode, encode, sha256_hex
from app.shared_memory.errors import IntegrityError

MB = 1024 * 1024


@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=8192))
def test_round_trip_any_bytes_any_threshold(data: bytes, threshold: int) -> None:
    enc = encode(data, threshold=threshold)
    assert enc.compressed == (len(data) > threshold)
    assert enc.sha256 == sha256_hex(data)
    assert enc.size == len(data)
    out = decode(enc.stored, compressed=enc.compressed, sha256=enc.sha256, size=enc.size)
    assert out == data


def test_default_threshold_is_one_megabyte() -> None:
    assert not encode(b"x" * MB).compressed
    big = b'{"row": 1234567890}' * (MB // 10)
    enc = encode(big)
    assert enc.compressed and len(enc.stored) < len(big) // 3
    assert decode(enc.stored, compressed=True, sha256=enc.sha256, size=enc.size) == big


def test_compression_is_deterministic() -> None:
    data = os.urandom(1000) * 2000
    assert encode(data).stored == encode(data).stored


@given(st.binary(min_size=1, max_size=512), st.data())
def test_any_single_byte_flip_is_detected(data: bytes, draw: st.DataObject) -> None:
    enc = encode(data, threshold=10**9)
    i = draw.draw(st.integers(0, len(data) - 1))
    bad = bytearray(enc.stored)
    bad[i] ^= 0x01
    with pytest.raises(IntegrityError):
        decode(bytes(bad), compressed=False, sha256=enc.sha256, size=enc.size)


def test_corrupted_gzip_is_integrity_error() -> None:
    data = b"abc" * 100_000
    enc = encode(data, threshold=10)
    with pytest.raises(IntegrityError):
        decode(enc.stored[:50] + b"garbage", compressed=True, sha256=enc.sha256, size=enc.size)


def test_gzip_bomb_is_bounded_by_recorded_size() -> None:
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    stored = bomb.compress(b"\0" * 50 * MB) + bomb.flush()
    with pytest.raises(IntegrityError):
        decode(stored, compressed=True, sha256=sha256_hex(b"\0" * 10), size=10)
