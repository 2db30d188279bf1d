"""The erasure tests share the facts tests' LLM-enabled API (the fake Anthropic server):
an erasure must reach the facts a fact extraction wrote."""

from tests.facts.conftest import llm_app, llm_client, llm_settings_for_facts  # noqa: F401
