"""API key secrets: generation and hashing (pure)."""

import hashlib
import secrets

KEY_PREFIX = "lm_"


def generate_key() -> str:
    """A new secret: `lm_` + 43 URL-safe characters (32 random bytes)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def display_prefix(secret: str) -> str:
    """The first characters of a key, safe to show in listings."""
    return secret[:10]
