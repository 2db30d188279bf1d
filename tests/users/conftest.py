"""The users tests share the facts tests' LLM-enabled API (the fake Anthropic server)."""

from tests.facts.conftest import llm_app, llm_client, llm_settings_for_facts  # noqa: F401
