"""The launcher: the `loom-memory` command line (`cli`), what `serve` says while it starts
(`startup`), the embedded stores (`embedded`, `embedded_redis`) and the migrations
(`migrate`). It starts processes and stores and builds the app through `app.main`; nothing
in the app imports it."""
