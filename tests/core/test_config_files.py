"""docker-compose.yml and .env.example name only real settings, and every setting is
documented."""

from pathlib import Path

import yaml

from app.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
ALIASES = {f.alias or name for name, f in Settings.model_fields.items()}
COMPOSE_ONLY = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}


def _compose_env() -> set[str]:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    names: set[str] = set()
    for svc in doc["services"].values():
        env = svc.get("environment") or {}
        names |= set(env) if isinstance(env, dict) else {e.split("=")[0] for e in env}
    return names


def test_compose_sets_only_real_settings():
    unknown = _compose_env() - ALIASES - COMPOSE_ONLY
    assert not unknown, f"compose sets variables that are not settings: {unknown}"


def test_compose_has_the_production_services():
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert {"postgres", "redis", "migrate", "api", "worker"} <= set(doc["services"])


def test_env_example_documents_every_setting():
    text = (ROOT / ".env.example").read_text()
    missing = [a for a in ALIASES if a not in text]
    assert not missing, f".env.example lacks {missing}"
