"""The distribution's name on the package index and its installed version: the one version
number, shown by `loom-memory --version`, `/healthz`, the API document and the MCP server's
info."""

import importlib.metadata

# not "loom-memory": that name on the package index is another project
DISTRIBUTION = "loom-memory-server"


def _version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "0+unknown"


VERSION = _version()
