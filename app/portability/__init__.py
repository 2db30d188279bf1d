"""Export and import (issue 28): a user, a session or a tenant as NDJSON."""
