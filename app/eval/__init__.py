"""Evaluation harnesses that measure a running server through its Python client
(`loom-memory eval ...`): `app.eval.locomo` (LoCoMo: search recall and the evidence in the
built context at a token budget)."""
