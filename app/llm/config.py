"""LLM settings (phase-1 stand-in; the same fields live in `app.core.config.Settings`).

`get_llm_client` only reads these attribute names, so it accepts either object.
"""

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_SUMMARY_MODEL = "claude-haiku-4-5"


class LLMSettings(BaseSettings):
    """LLM provider, model, timeout and retry settings."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    llm_provider: Literal["anthropic", "openai", "none"] = Field(
        default="anthropic", alias="LOOM_LLM_PROVIDER")
    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    summary_model: str = Field(default=DEFAULT_SUMMARY_MODEL, alias="LOOM_SUMMARY_MODEL")
    rerank_model: str | None = Field(default=None, alias="LOOM_RERANK_MODEL")
    llm_timeout_seconds: float = Field(default=30.0, gt=0, alias="LOOM_LLM_TIMEOUT_SECONDS")
    llm_max_retries: int = Field(default=2, ge=0, alias="LOOM_LLM_MAX_RETRIES")
    openai_base_url: str | None = Field(default=None, alias="LOOM_OPENAI_BASE_URL")
    openai_api_key: SecretStr | None = Field(default=None, alias="LOOM_OPENAI_API_KEY")
    openai_model: str | None = Field(default=None, alias="LOOM_OPENAI_MODEL")
    summary_max_tokens: int = Field(default=600, ge=32, alias="LOOM_SUMMARY_MAX_TOKENS")
    summary_input_tokens: int = Field(default=100_000, ge=1000,
                                      alias="LOOM_SUMMARY_INPUT_TOKENS")
