# Generated from loom_client/_async/knowledge.py by scripts/generate_sync.py: do not edit.
"""Knowledge items (task / project / global), context packages, the learned layer and
agent profiles."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from loom_client import _wire
from loom_client._sync.base import BaseClient
from loom_client._wire import RequestOptions, segment
from loom_client.models.knowledge import (
    ClearResult,
    ContextPackage,
    ExtractResult,
    FactExtraction,
    Learned,
    MemoryItem,
    MemoryItemHistory,
    MemoryItemList,
    OrderBy,
    Profile,
    TaskCompleteResult,
)
from loom_client.models.sessions import TierShares
from loom_client.operations import operation


class KnowledgeMixin(BaseClient):
    @operation("POST", "/v1/memory-items")
    def create_memory_item(self, scope: str, kind: str, *, text: str | None = None,
                           payload: Any = None, importance: float | None = None,
                           tags: Iterable[str] | None = None, source: str | None = None,
                           options: RequestOptions | None = None) -> MemoryItem:
        """Store an item in `task/<id>`, `project/<id>` or `global` (give `text`,
        `payload` or both)."""
        return self._request(
      MemoryItem, "POST", "/v1/memory-items", options=options,
      json=_wire.body(scope=scope, kind=kind, text=text, payload=payload,
                      importance=importance, source=source,
                      tags=list(tags) if tags is not None else None))

    @operation("GET", "/v1/memory-items/{item_id}")
    def get_memory_item(self, item_id: str, *,
                        options: RequestOptions | None = None) -> MemoryItem:
        return self._request(MemoryItem, "GET", f"/v1/memory-items/{segment(item_id)}",
                             options=options)

    @operation("DELETE", "/v1/memory-items/{item_id}")
    def delete_memory_item(self, item_id: str, *,
                           options: RequestOptions | None = None) -> None:
        self._send("DELETE", f"/v1/memory-items/{segment(item_id)}", options=options)

    @operation("PATCH", "/v1/memory-items/{item_id}")
    def update_memory_item(self, item_id: str, version: int, *,
                           changes: Mapping[str, Any], reason: str | None = None,
                           options: RequestOptions | None = None) -> MemoryItem:
        """Correct an item: `changes` holds the fields to change (text, importance, tags,
        key, valid_from, invalid_at; `invalid_at: None` makes it true again); `version` is
        the one it corrects (a stale one raises the 409 `version_conflict` error)."""
        return self._request(
      MemoryItem, "PATCH", f"/v1/memory-items/{segment(item_id)}", options=options,
      headers=_wire.preconditions(version, None),
      json={**{k: v.isoformat() if isinstance(v, datetime) else v
               for k, v in changes.items()},
            **({"reason": reason} if reason is not None else {})})

    @operation("POST", "/v1/memory-items/query")
    def query_memory_items(self, *, filters: Mapping[str, Any] | None = None,
                           order_by: OrderBy | None = None, limit: int | None = None,
                           cursor: str | None = None,
                           include_invalidated: bool = False,
                           options: RequestOptions | None = None) -> MemoryItemList:
        """One page of items matching `filters` (field -> value, a list for any of, or
        `{"$gte": ...}`-style operators). `order_by`: `"field"` sorts descending (newest,
        highest first; default `"timestamp"`), `"-field"` ascending. Superseded facts only
        with `include_invalidated`."""
        return self._request(
      MemoryItemList, "POST", "/v1/memory-items/query", options=options,
      params=_wire.query(include_invalidated=include_invalidated or None),
      json=_wire.body(filters=filters, order_by=order_by, limit=limit, cursor=cursor))

    @operation("GET", "/v1/memory-items/{item_id}/history")
    def get_memory_item_history(self, item_id: str, *,
                                options: RequestOptions | None = None
                                ) -> MemoryItemHistory:
        """A fact's versions (oldest first), what replaced it and what it replaced."""
        return self._request(MemoryItemHistory, "GET",
                             f"/v1/memory-items/{segment(item_id)}/history",
                             options=options)

    @operation("POST", "/v1/sessions/{session_id}/memory/extract")
    def extract_facts(self, session_id: str, *, wait: bool = False,
                      options: RequestOptions | None = None) -> ExtractResult:
        """Queue fact extraction (`enqueued=True`), or with `wait=True` extract now."""
        return self._request(ExtractResult, "POST",
                             f"/v1/sessions/{segment(session_id)}/memory/extract",
                             options=options, params=_wire.query(wait=wait or None))

    @operation("GET", "/v1/sessions/{session_id}/memory/extract")
    def get_fact_extraction(self, session_id: str, *,
                            options: RequestOptions | None = None) -> FactExtraction:
        """The session's fact extraction: watermark, latest job and LLM usage."""
        return self._request(FactExtraction, "GET",
                             f"/v1/sessions/{segment(session_id)}/memory/extract",
                             options=options)

    @operation("POST", "/v1/memory-items/query")
    def iter_memory_items(self, *, filters: Mapping[str, Any] | None = None,
                          order_by: OrderBy | None = None, page_size: int | None = None,
                          options: RequestOptions | None = None
                          ) -> Iterator[MemoryItem]:
        """Every matching item, following the cursors."""
        cursor: str | None = None
        while True:
            page = self.query_memory_items(filters=filters, order_by=order_by,
                                           limit=page_size, cursor=cursor,
                                           options=options)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    @operation("POST", "/v1/memory-items/{item_id}/promote")
    def promote_memory_item(self, item_id: str, *, project_id: str | None = None,
                            options: RequestOptions | None = None) -> MemoryItem:
        """Move an item one tier up: task -> project (needs `project_id`) -> global."""
        return self._request(
      MemoryItem, "POST", f"/v1/memory-items/{segment(item_id)}/promote",
      options=options, json=_wire.body(project_id=project_id))

    @operation("POST", "/v1/memory-items/clear")
    def clear_memory_items(self, scope: str, *, filters: Mapping[str, Any] | None = None,
                           confirm: bool | None = None,
                           options: RequestOptions | None = None) -> ClearResult:
        """Delete a scope's items (only the matching ones with `filters`); clearing
        `global` needs `confirm=True`."""
        return self._request(
      ClearResult, "POST", "/v1/memory-items/clear", options=options,
      json=_wire.body(scope=scope, filters=filters, confirm=confirm))

    @operation("POST", "/v1/tasks/{task_id}/complete")
    def complete_task(self, task_id: str, *, promote: Iterable[str] | None = None,
                      project_id: str | None = None,
                      options: RequestOptions | None = None) -> TaskCompleteResult:
        """Promote the listed task items to the project, then clear the task's memory."""
        return self._request(
      TaskCompleteResult, "POST", f"/v1/tasks/{segment(task_id)}/complete",
      options=options, json=_wire.body(
          promote=list(promote) if promote is not None else None, project_id=project_id))

    @operation("POST", "/v1/context-packages")
    def create_context_package(self, budget_tokens: int, *, task_id: str | None = None,
                               project_id: str | None = None,
                               include_global: bool | None = None,
                               shares: TierShares | Mapping[str, float] | None = None,
                               head_tail: int | None = None,
                               filters: Mapping[str, Any] | None = None,
                               options: RequestOptions | None = None) -> ContextPackage:
        """Items of the task, project and global tiers within `budget_tokens`."""
        return self._request(
      ContextPackage, "POST", "/v1/context-packages", options=options,
      json=_wire.body(budget_tokens=budget_tokens, task_id=task_id,
                      project_id=project_id, include_global=include_global,
                      shares=shares, head_tail=head_tail, filters=filters))

    @operation("GET", "/v1/agents/{agent_id}/learned")
    def get_learned(self, agent_id: str, *, version: int | None = None,
                    options: RequestOptions | None = None) -> Learned:
        """The active learned version of an agent (or `version`)."""
        return self._request(Learned, "GET", f"/v1/agents/{segment(agent_id)}/learned",
                             options=options, params=_wire.query(version=version))

    @operation("PUT", "/v1/agents/{agent_id}/learned")
    def put_learned(self, agent_id: str, *,
                    signatures: Mapping[str, Any] | None = None,
                    demonstrations: Iterable[Any] | None = None,
                    tuned_prompts: Mapping[str, Any] | None = None,
                    metadata: Mapping[str, Any] | None = None,
                    options: RequestOptions | None = None) -> Learned:
        """Store a new learned version for the agent and make it active."""
        return self._request(
      Learned, "PUT", f"/v1/agents/{segment(agent_id)}/learned", options=options,
      json=_wire.body(signatures=signatures, tuned_prompts=tuned_prompts,
                      metadata=metadata, demonstrations=list(demonstrations)
                      if demonstrations is not None else None))

    @operation("POST", "/v1/agents/{agent_id}/learned/rollback")
    def rollback_learned(self, agent_id: str, *, to_version: int | None = None,
                         options: RequestOptions | None = None) -> Learned:
        """Make an earlier version active (default: the one before the active one)."""
        return self._request(
      Learned, "POST", f"/v1/agents/{segment(agent_id)}/learned/rollback",
      options=options, json=_wire.body(to_version=to_version))

    @operation("GET", "/v1/agents/{agent_id}/profile")
    def get_profile(self, agent_id: str, *, version: int | None = None,
                    options: RequestOptions | None = None) -> Profile:
        """The agent's profile (latest, or `version`)."""
        return self._request(Profile, "GET", f"/v1/agents/{segment(agent_id)}/profile",
                             options=options, params=_wire.query(version=version))

    @operation("PUT", "/v1/agents/{agent_id}/profile")
    def put_profile(self, agent_id: str, system_prompt: str, *,
                    patterns: Iterable[Any] | None = None, backend_schema: Any = None,
                    options: RequestOptions | None = None) -> Profile:
        """Store a new profile version (the ROM the agent's new sessions start with)."""
        return self._request(
      Profile, "PUT", f"/v1/agents/{segment(agent_id)}/profile", options=options,
      json=_wire.body(system_prompt=system_prompt, backend_schema=backend_schema,
                      patterns=list(patterns) if patterns is not None else None))
