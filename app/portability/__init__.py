"""Export and import: a user, a session or a tenant as NDJSON."""
