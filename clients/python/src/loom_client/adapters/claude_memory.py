"""A backend for Claude's `memory` tool on Loom shared memory: `LoomMemoryTool` (sync) and
`AsyncLoomMemoryTool`, subclasses of the `anthropic` SDK's `BetaAbstractMemoryTool`.

```python
import anthropic
from loom_client import LoomClient
from loom_client.adapters.claude_memory import LoomMemoryTool

memory = LoomMemoryTool.for_agent(LoomClient(url, key, agent_id="researcher"))
runner = anthropic.Anthropic().beta.messages.tool_runner(
    model=MODEL, max_tokens=1024, tools=[memory],
    messages=[{"role": "user", "content": "Remember that I prefer metric units"}])
for message in runner: ...
```

The commands (`view`, `create`, `str_replace`, `insert`, `delete`, `rename`) act on files
under `/memories` with the semantics and messages of the SDK's own filesystem backend
(`BetaLocalFilesystemMemoryTool`): `view` lists a directory two levels deep (hidden names
left out) or shows a file with line numbers (`view_range` too); `create` refuses an existing
file; `str_replace` needs `old_str` exactly once; `insert` takes a line in 0..line count;
`delete` and `rename` take files or directories and refuse `/memories` itself.

Storage: the file `/memories/notes/todo.md` is the shared-memory entry
`{root}/notes/todo.md` holding the text (`text/plain; charset=utf-8`), in the Loom namespace
`namespace`. Directories are key prefixes: they exist while a file is under them.
Scopes: `for_agent(client)` keeps the files in the `agent` namespace, private to the
client's agent; `for_user(client, user_id)` in `global` under
`claude-memory/users/<user id>`, shared by the tenant's agents working with that person;
or choose `namespace`, `scope_id` and `root` yourself.

Paths: absolute, `/memories` or below it, refused with a ToolError (an `is_error` tool
result the model reads) when they hold `..` or `.` segments, empty segments (`//`), a
backslash, control or invisible characters, percent-encoded bytes (`%2e%2e`, `%2f`), or
characters that Unicode compatibility folds into dots or slashes (fullwidth `．．`, `／`),
or when the Loom key would pass 256 characters.

Not supported: atomic `rename` of a directory (files move one by one, each copy-then-delete,
so a crash in between can leave a file under both names); edits are compare-and-set, so a
concurrent writer makes `str_replace`/`insert` fail with "changed while being edited".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import quote

from anthropic.lib.tools import (
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    BetaFunctionToolResultType,
    ToolError,
)
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from loom_client._async.client import AsyncLoomClient
from loom_client._sync.client import LoomClient
from loom_client.errors import BadRequest, Conflict, NotFound, PreconditionFailed
from loom_client.models.shared_memory import SharedMemoryBlob, SharedMemoryEntry

__all__ = ["AsyncLoomMemoryTool", "LoomMemoryTool", "memory_key"]

MEMORIES = "/memories"
MAX_KEY_CHARS = 256
MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
TEXT = "text/plain; charset=utf-8"
PAGE_SIZE = 1000
_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}")
T = TypeVar("T")


# --- paths (pure) ---------------------------------------------------------------------------


def _bad_char(ch: str) -> bool:
    if ch == " ":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Zs", "Zl", "Zp")


def memory_path(path: object) -> str:
    """The path relative to /memories ("" for /memories itself); ToolError when it is not
    a safe path under /memories."""
    if not isinstance(path, str) or not path:
        raise ToolError("A path is required, e.g. /memories/notes.md")
    if any(_bad_char(ch) for ch in path):
        raise ToolError(f"The path {path!r} holds control or invisible characters")
    if "\\" in path:
        raise ToolError(f"The path {path} holds a backslash; use / between directories")
    if _ENCODED.search(path):
        raise ToolError(f"The path {path} holds percent-encoded characters; write them plainly")
    folded = unicodedata.normalize("NFKC", path)
    if folded != path and (
        folded.count("/") != path.count("/")
        or "\\" in folded
        or any(s in (".", "..") for s in folded.split("/"))
    ):
        raise ToolError(f"The path {path} holds characters that read as dots or slashes")
    trimmed = path[:-1] if path.endswith("/") else path  # a directory may end with `/`
    if trimmed == MEMORIES:
        return ""
    if not trimmed.startswith(MEMORIES + "/"):
        raise ToolError(f"Path must start with /memories, got: {path}")
    rel = trimmed[len(MEMORIES) + 1 :]
    segments = rel.split("/")
    if any(s in ("", ".", "..") for s in segments):
        raise ToolError(f"Path {path} would escape /memories directory")
    return rel


def memory_key(root: str, rel: str) -> str:
    """The shared-memory key of a file (or the prefix of a directory, without its `/`)."""
    key = f"{root}/{rel}" if rel else root
    if len(key) > MAX_KEY_CHARS:
        raise ToolError(
            f"The path /memories/{rel} is too long ({len(key) - len(root) + len(MEMORIES)} "
            f"characters; at most {MAX_KEY_CHARS - len(root) + len(MEMORIES)})"
        )
    return key


def _show(rel: str) -> str:
    return f"{MEMORIES}/{rel}" if rel else MEMORIES


# --- file text (pure, as the SDK's filesystem backend) --------------------------------------


def _split_lines_keeping_cr(content: str) -> list[str]:
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _size(n: int) -> str:
    if n == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((n.bit_length() - 1) // 10, len(units) - 1)
    size = n / (1024**i)
    return f"{int(size)}{units[i]}" if size == int(size) else f"{size:.1f}{units[i]}"


def numbered(path: str, content: str, view_range: list[int] | None) -> str:
    lines = content.split("\n")
    if len(lines) > MAX_LINES:
        raise ToolError(f"File {path} exceeds maximum line limit of 999,999 lines.")
    start = 1
    if view_range and len(view_range) == 2:
        first = max(1, view_range[0]) - 1
        end = len(lines) if view_range[1] == -1 else view_range[1]
        lines, start = lines[first:end], first + 1
    body = "\n".join(f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{t}" for i, t in enumerate(lines))
    return f"Here's the content of {path} with line numbers:\n" + body


def listing(path: str, entries: list[tuple[str, int]]) -> str:
    """A directory's view: `entries` are (path below the directory, size) of its files."""
    dirs: dict[str, int] = {}
    files: dict[str, int] = {}
    for rel, size in entries:
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts[:2]):
            continue  # hidden, as the filesystem backend leaves them out
        for depth in range(1, min(len(parts), 2) + 1):
            if depth < len(parts):
                name = "/".join(parts[:depth])
                dirs[name] = dirs.get(name, 0) + size
        if len(parts) <= 2:
            files[rel] = size
    shown = path.rstrip("/") or MEMORIES
    rows = sorted(
        [(f"{d}/", s) for d, s in dirs.items()] + list(files.items()),
        key=lambda r: r[0].rstrip("/").split("/"),
    )
    lines = [f"{_size(sum(s for _, s in entries))}\t{path}"]
    lines += [f"{_size(s)}\t{shown}/{name}" for name, s in rows]
    return (
        f"Here're the files and directories up to 2 levels deep in {path}, "
        "excluding hidden items:\n" + "\n".join(lines)
    )


def replaced(path: str, content: str, old: str, new: str) -> tuple[str, str]:
    """(new content, the result) of a str_replace; ToolError unless `old` is there once."""
    count = content.count(old) if old else 0
    if count == 0:
        raise ToolError(
            f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
        )
    if count > 1:
        lines, start = [], 0
        while (pos := content.find(old, start)) != -1:
            lines.append(content[:pos].count("\n") + 1)
            start = pos + 1
        raise ToolError(
            f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
            f"{', '.join(map(str, lines))}. Please ensure it is unique"
        )
    changed = content[: content.find(old)].count("\n")
    text = content.replace(old, new)
    new_lines = text.split("\n")
    first, end = max(0, changed - 2), min(len(new_lines), changed + 3)
    snippet = "\n".join(
        f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{new_lines[n - 1]}" for n in range(first + 1, end + 1)
    )
    return text, (
        "The memory file has been edited. Here is the snippet showing the change "
        "(with line numbers):\n" + snippet
    )


def inserted(content: str, line: int, text: str) -> str:
    lines = _split_lines_keeping_cr(content)
    if not isinstance(line, int) or line < 0 or line > len(lines):
        raise ToolError(
            f"Invalid `insert_line` parameter: {line}. "
            f"It should be within the range [0, {len(lines)}]."
        )
    lines.insert(line, text.rstrip("\n"))
    out = "\n".join(lines)
    return out if out.endswith("\n") else out + "\n"


# --- storage: one set of async primitives, the sync client's run without suspending ---------


@dataclass(frozen=True)
class File:
    text: str
    version: int


class _Store:
    """Shared-memory files under `root` (async primitives)."""

    def __init__(self, namespace: str, scope_id: str | None, root: str) -> None:
        self.namespace, self.scope_id, self.root = namespace, scope_id, root

    async def get(self, key: str) -> SharedMemoryEntry | SharedMemoryBlob:
        raise NotImplementedError

    async def put(self, key: str, text: str, **pre: Any) -> None:
        raise NotImplementedError

    async def remove(self, key: str, **pre: Any) -> None:
        raise NotImplementedError

    async def keys(self, prefix: str) -> list[tuple[str, int]]:
        raise NotImplementedError

    async def read(self, key: str) -> File | None:
        try:
            entry = await self.get(key)
        except NotFound:
            return None
        except BadRequest as exc:  # a key Loom refuses (its rules, its length)
            raise ToolError(
                f"The path {_show(key[len(self.root) + 1 :])} is refused: {exc.message}"
            ) from exc
        if isinstance(entry, SharedMemoryBlob):
            return File(entry.content.decode("utf-8", errors="replace"), entry.version or 0)
        value = entry.value
        return File(value if isinstance(value, str) else str(value), entry.version)

    async def below(self, rel: str) -> list[tuple[str, int]]:
        """(path below `rel`, size) of every file in the directory `rel`."""
        prefix = memory_key(self.root, rel) + "/"
        try:
            found = await self.keys(prefix)
        except BadRequest as exc:
            raise ToolError(f"The path {_show(rel)} is refused: {exc.message}") from exc
        return [(k[len(prefix) :], size) for k, size in found]


class _SyncStore(_Store):
    def __init__(self, client: LoomClient, *args: Any) -> None:
        super().__init__(*args)
        self.client = client

    async def get(self, key: str) -> SharedMemoryEntry | SharedMemoryBlob:
        return self.client.get_shared_memory(self.namespace, key, scope_id=self.scope_id)

    async def put(self, key: str, text: str, **pre: Any) -> None:
        self.client.put_shared_memory_bytes(
            self.namespace,
            key,
            text.encode("utf-8"),
            content_type=TEXT,
            scope_id=self.scope_id,
            **pre,
        )

    async def remove(self, key: str, **pre: Any) -> None:
        self.client.delete_shared_memory(self.namespace, key, scope_id=self.scope_id, **pre)

    async def keys(self, prefix: str) -> list[tuple[str, int]]:
        return [
            (k.key, k.size_bytes)
            for k in self.client.iter_shared_memory_keys(
                self.namespace, scope_id=self.scope_id, prefix=prefix, page_size=PAGE_SIZE
            )
        ]


class _AsyncStore(_Store):
    def __init__(self, client: AsyncLoomClient, *args: Any) -> None:
        super().__init__(*args)
        self.client = client

    async def get(self, key: str) -> SharedMemoryEntry | SharedMemoryBlob:
        return await self.client.get_shared_memory(self.namespace, key, scope_id=self.scope_id)

    async def put(self, key: str, text: str, **pre: Any) -> None:
        await self.client.put_shared_memory_bytes(
            self.namespace,
            key,
            text.encode("utf-8"),
            content_type=TEXT,
            scope_id=self.scope_id,
            **pre,
        )

    async def remove(self, key: str, **pre: Any) -> None:
        await self.client.delete_shared_memory(self.namespace, key, scope_id=self.scope_id, **pre)

    async def keys(self, prefix: str) -> list[tuple[str, int]]:
        return [
            (k.key, k.size_bytes)
            async for k in self.client.iter_shared_memory_keys(
                self.namespace, scope_id=self.scope_id, prefix=prefix, page_size=PAGE_SIZE
            )
        ]


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the sync store's primitives don't)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise RuntimeError("the sync memory tool suspended")  # pragma: no cover


# --- the commands (one implementation for both tools) ---------------------------------------


class _Commands:
    def __init__(self, store: _Store) -> None:
        self.store = store

    def key(self, rel: str) -> str:
        return memory_key(self.store.root, rel)

    async def _file(self, path: str, rel: str) -> File:
        file = await self.store.read(self.key(rel)) if rel else None
        if file is None:
            if not rel or await self.store.below(rel):
                raise ToolError(f"The path {path} is not a file.")
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return file

    async def _write(self, path: str, rel: str, text: str, **pre: Any) -> None:
        try:
            await self.store.put(self.key(rel), text, **pre)
        except (Conflict, PreconditionFailed) as exc:
            if pre.get("if_none_match") == "*":
                raise ToolError(f"File {path} already exists") from exc
            raise ToolError(
                f"The file {path} changed while it was being edited; view it and try again."
            ) from exc
        except BadRequest as exc:
            raise ToolError(f"The path {path} cannot be stored: {exc.message}") from exc

    async def _no_file_above(self, path: str, rel: str) -> None:
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            if await self.store.read(self.key("/".join(parts[:depth]))) is not None:
                above = _show("/".join(parts[:depth]))
                raise ToolError(f"Cannot create {path}: {above} is a file, not a directory")

    async def view(self, path: str, view_range: list[int] | None) -> str:
        rel = memory_path(path)
        file = await self.store.read(self.key(rel)) if rel else None
        if file is not None:
            return numbered(path, file.text, view_range)
        below = await self.store.below(rel)
        if rel and not below:
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return listing(path, below)

    async def create(self, path: str, text: object) -> str:
        rel = memory_path(path)
        if not isinstance(text, str):
            raise ToolError("`file_text` must be a string")
        if not rel or path.endswith("/") or await self.store.below(rel):
            raise ToolError(f"The path {path} is a directory")
        await self._no_file_above(path, rel)
        await self._write(path, rel, text, if_none_match="*")
        return f"File created successfully at: {path}"

    async def str_replace(self, path: str, old: object, new: object) -> str:
        rel = memory_path(path)
        if not isinstance(old, str) or not isinstance(new, str):
            raise ToolError("`old_str` and `new_str` must be strings")
        file = await self._file(path, rel)
        text, result = replaced(path, file.text, old, new)
        await self._write(path, rel, text, if_match=file.version)
        return result

    async def insert(self, path: str, line: object, text: object) -> str:
        rel = memory_path(path)
        if not isinstance(text, str) or not isinstance(line, int) or isinstance(line, bool):
            raise ToolError("`insert_line` must be an integer and `insert_text` a string")
        file = await self._file(path, rel)
        await self._write(path, rel, inserted(file.text, line, text), if_match=file.version)
        return f"The file {path} has been edited."

    async def delete(self, path: str) -> str:
        rel = memory_path(path)
        if not rel:
            raise ToolError("Cannot delete the /memories directory itself")
        file = await self.store.read(self.key(rel))
        if file is not None:
            await self._remove(rel)
        else:
            below = await self.store.below(rel)
            if not below:
                raise ToolError(f"The path {path} does not exist")
            for sub, _ in below:
                await self._remove(f"{rel}/{sub}")
        return f"Successfully deleted {path}"

    async def _remove(self, rel: str) -> None:
        try:
            await self.store.remove(self.key(rel))
        except NotFound:
            pass

    async def rename(self, old_path: str, new_path: str) -> str:
        old, new = memory_path(old_path), memory_path(new_path)
        if not old:
            raise ToolError("Cannot rename the /memories directory itself")
        if not new:
            raise ToolError(f"The destination {new_path} already exists")
        if new == old or new.startswith(old + "/"):
            raise ToolError(f"Cannot move {old_path} into itself ({new_path})")
        if await self.store.read(self.key(new)) is not None or await self.store.below(new):
            raise ToolError(f"The destination {new_path} already exists")
        await self._no_file_above(new_path, new)
        file = await self.store.read(self.key(old))
        moves = (
            [("", file)]
            if file is not None
            else [
                (f"/{sub}", await self.store.read(self.key(f"{old}/{sub}")))
                for sub, _ in await self.store.below(old)
            ]
        )
        if not moves:
            raise ToolError(f"The path {old_path} does not exist")
        for tail, moving in moves:
            if moving is None:
                continue  # deleted meanwhile
            await self._write(_show(new + tail), new + tail, moving.text, if_none_match="*")
            try:
                await self.store.remove(self.key(old + tail), if_match=moving.version)
            except NotFound:
                pass
        return f"Successfully renamed {old_path} to {new_path}"

    async def clear(self) -> str:
        for sub, _ in await self.store.below(""):
            await self._remove(sub)
        return "All memory cleared"


def _user_root(user_id: str) -> str:
    if not user_id:
        raise ValueError("user_id must be a non-empty string")
    return "claude-memory/users/" + quote(user_id, safe="").replace(".", "%2E")


def _check_root(root: str) -> str:
    if not root or root.strip("/") != root or any(s in ("", ".", "..") for s in root.split("/")):
        raise ValueError(f"root must be one or more non-empty key segments: {root!r}")
    return root


class LoomMemoryTool(BetaAbstractMemoryTool):
    """Claude's `memory` tool on Loom shared memory, with the sync client (see the module
    docstring). Give it to `client.beta.messages.tool_runner(tools=[...])`, or call
    `tool.call(tool_use.input)` yourself."""

    def __init__(
        self,
        client: LoomClient,
        *,
        namespace: str = "agent",
        scope_id: str | None = None,
        root: str = "claude-memory",
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._commands = _Commands(_SyncStore(client, namespace, scope_id, _check_root(root)))

    @classmethod
    def for_agent(cls, client: LoomClient, **kwargs: Any) -> LoomMemoryTool:
        """Files private to the client's agent (the `agent` namespace)."""
        return cls(client, namespace="agent", **kwargs)

    @classmethod
    def for_user(cls, client: LoomClient, user_id: str, **kwargs: Any) -> LoomMemoryTool:
        """Files about one user, shared by the tenant's agents (`global`)."""
        return cls(client, namespace="global", root=_user_root(user_id), **kwargs)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> BetaFunctionToolResultType:
        return _run_sync(
            self._commands.view(_arg(command, "path"), getattr(command, "view_range", None))
        )

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> BetaFunctionToolResultType:
        return _run_sync(
            self._commands.create(_arg(command, "path"), getattr(command, "file_text", None))
        )

    def str_replace(
        self, command: BetaMemoryTool20250818StrReplaceCommand
    ) -> BetaFunctionToolResultType:
        return _run_sync(
            self._commands.str_replace(
                _arg(command, "path"),
                getattr(command, "old_str", None),
                getattr(command, "new_str", None),
            )
        )

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> BetaFunctionToolResultType:
        return _run_sync(
            self._commands.insert(
                _arg(command, "path"),
                getattr(command, "insert_line", None),
                getattr(command, "insert_text", None),
            )
        )

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> BetaFunctionToolResultType:
        return _run_sync(self._commands.delete(_arg(command, "path")))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> BetaFunctionToolResultType:
        return _run_sync(
            self._commands.rename(_arg(command, "old_path"), _arg(command, "new_path"))
        )

    def clear_all_memory(self) -> BetaFunctionToolResultType:
        """Delete every file of this tool's scope."""
        return _run_sync(self._commands.clear())


class AsyncLoomMemoryTool(BetaAsyncAbstractMemoryTool):
    """`LoomMemoryTool` with the async client, for the SDK's async tool runner."""

    def __init__(
        self,
        client: AsyncLoomClient,
        *,
        namespace: str = "agent",
        scope_id: str | None = None,
        root: str = "claude-memory",
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._commands = _Commands(_AsyncStore(client, namespace, scope_id, _check_root(root)))

    @classmethod
    def for_agent(cls, client: AsyncLoomClient, **kwargs: Any) -> AsyncLoomMemoryTool:
        """Files private to the client's agent (the `agent` namespace)."""
        return cls(client, namespace="agent", **kwargs)

    @classmethod
    def for_user(cls, client: AsyncLoomClient, user_id: str, **kwargs: Any) -> AsyncLoomMemoryTool:
        """Files about one user, shared by the tenant's agents (`global`)."""
        return cls(client, namespace="global", root=_user_root(user_id), **kwargs)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> BetaFunctionToolResultType:
        return await self._commands.view(
            _arg(command, "path"), getattr(command, "view_range", None)
        )

    async def create(
        self, command: BetaMemoryTool20250818CreateCommand
    ) -> BetaFunctionToolResultType:
        return await self._commands.create(
            _arg(command, "path"), getattr(command, "file_text", None)
        )

    async def str_replace(
        self, command: BetaMemoryTool20250818StrReplaceCommand
    ) -> BetaFunctionToolResultType:
        return await self._commands.str_replace(
            _arg(command, "path"),
            getattr(command, "old_str", None),
            getattr(command, "new_str", None),
        )

    async def insert(
        self, command: BetaMemoryTool20250818InsertCommand
    ) -> BetaFunctionToolResultType:
        return await self._commands.insert(
            _arg(command, "path"),
            getattr(command, "insert_line", None),
            getattr(command, "insert_text", None),
        )

    async def delete(
        self, command: BetaMemoryTool20250818DeleteCommand
    ) -> BetaFunctionToolResultType:
        return await self._commands.delete(_arg(command, "path"))

    async def rename(
        self, command: BetaMemoryTool20250818RenameCommand
    ) -> BetaFunctionToolResultType:
        return await self._commands.rename(_arg(command, "old_path"), _arg(command, "new_path"))

    async def clear_all_memory(self) -> BetaFunctionToolResultType:
        """Delete every file of this tool's scope."""
        return await self._commands.clear()


def _arg(command: object, name: str) -> str:
    value = getattr(command, name, None)
    if not isinstance(value, str):
        raise ToolError(f"`{name}` is required (a path under /memories)")
    return value
