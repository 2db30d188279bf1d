"""Settings: one `Settings` object, read from the environment (and `.env`)."""

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every setting the service reads. Each is documented in `.env.example`."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    # Stores. Unset = the embedded default starts its own (see app/embedded.py).
    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    data_dir: Path = Field(default=Path(".loom"), alias="LOOM_DATA_DIR")

    # HTTP
    host: str = Field(default="127.0.0.1", alias="LOOM_HOST")
    port: int = Field(default=8420, alias="LOOM_PORT")
    log_level: str = Field(default="info", alias="LOOM_LOG_LEVEL")
    db_pool_size: int = Field(default=10, alias="LOOM_DB_POOL_SIZE")

    # Auth
    admin_key: SecretStr | None = Field(default=None, alias="LOOM_ADMIN_KEY")
    rate_limit_per_second: float = Field(default=0.0, alias="LOOM_RATE_LIMIT_PER_SECOND")
    rate_limit_burst: int = Field(default=50, alias="LOOM_RATE_LIMIT_BURST")

    # Messages
    max_messages_per_request: int = Field(default=1000, alias="LOOM_MAX_MESSAGES_PER_REQUEST")
    max_request_bytes: int = Field(default=64 * 1024 * 1024, alias="LOOM_MAX_REQUEST_BYTES")
    default_text_search_config: str = Field(default="english", alias="LOOM_TEXT_SEARCH_CONFIG")

    # Worker
    queue_name: str = Field(default="arq:queue", alias="LOOM_QUEUE_NAME")
    run_worker_in_serve: bool = Field(default=True, alias="LOOM_RUN_WORKER")

    @field_validator("database_url")
    @classmethod
    def _asyncpg_dsn(cls, v: str | None) -> str | None:
        return async_dsn(v) if v else v


def async_dsn(url: str) -> str:
    """Normalise any PostgreSQL URL to the asyncpg driver form SQLAlchemy needs."""
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


@lru_cache
def get_settings() -> Settings:
    return Settings()
