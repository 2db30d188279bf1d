"""Context manifests: the record of what a context build showed the model (ids,
versions and hashes, no content), stored per build, listed, diffed and replayed."""
