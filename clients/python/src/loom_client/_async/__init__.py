"""The client implementation: `_sync` is generated from `_async` by `scripts/generate_sync.py`."""
