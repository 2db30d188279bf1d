"""LLM access: provider clients (`client`), errors, and the summariser (`summarise`)."""

from app.llm.client import LLMClient, get_llm_client
from app.llm.errors import LLMError

__all__ = ["LLMClient", "LLMError", "get_llm_client"]
