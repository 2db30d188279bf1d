"""Shared memory: namespaced key/value entries, agent-private scoping, data references.

Pure policy lives in `keys`, `codec`, `tier`, `ttl`, `etag` and `refs` (no I/O); SQL in
`repository`, logic in `service`, HTTP in `router`.
"""
