"""LLM access: provider clients (`client`) and their errors. The LLM summaries of message
ranges are memory's (`app.memory.llm_summariser`)."""

from app.llm.client import LLMClient, get_llm_client
from app.llm.errors import LLMError

__all__ = ["LLMClient", "LLMError", "get_llm_client"]
