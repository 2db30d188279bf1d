# Generated from loom_client/_async/__init__.py by scripts/generate_sync.py: do not edit.
"""The client implementation: `_sync` is generated from `_async` by `scripts/generate_sync.py`."""
