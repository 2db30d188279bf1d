"""No answer from the server is the client's own error, not httpx's: `LoomConnectionError`
(a `LoomError`, status 0) in the sync and async clients and their watch streams, with the
httpx exception as its cause."""

import asyncio
import socket
from collections.abc import Iterator

import httpx
import pytest
from loom_client import AsyncLoomClient, LoomClient, LoomConnectionError, LoomError

from tests.support.live import free_port


@pytest.fixture
def nobody() -> str:
    """The address of a port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _is_connect_error(exc: LoomConnectionError, base: str, path: str) -> None:
    assert isinstance(exc, LoomError) and exc.status == 0 and exc.code == "connect_error"
    assert exc.url == base + path
    assert str(exc).startswith(f"connect_error: cannot connect to {base}{path}: is the")
    assert isinstance(exc.__cause__, httpx.ConnectError)


def test_sync_client_server_down(nobody):
    with LoomClient(nobody, "lm_test", agent_id="a") as loom:
        with pytest.raises(LoomConnectionError) as raised:
            loom.healthz()
        _is_connect_error(raised.value, nobody, "/healthz")
        with pytest.raises(LoomConnectionError) as raised:
            loom.list_sessions(limit=1)  # the query is not part of the error's url
        _is_connect_error(raised.value, nobody, "/v1/sessions")
        with pytest.raises(LoomConnectionError) as raised:
            with loom.watch_shared_memory("global") as stream:
                next(iter(stream))
        _is_connect_error(raised.value, nobody, "/v1/shared-memory/global/watch")


def test_async_client_server_down(nobody):
    async def run() -> None:
        async with AsyncLoomClient(nobody, "lm_test", agent_id="a") as loom:
            with pytest.raises(LoomConnectionError) as raised:
                await loom.healthz()
            _is_connect_error(raised.value, nobody, "/healthz")
            with pytest.raises(LoomConnectionError) as raised:
                async with loom.watch_shared_memory("global") as stream:
                    await stream.__anext__()
            _is_connect_error(raised.value, nobody, "/v1/shared-memory/global/watch")

    asyncio.run(run())


def test_no_answer_within_the_timeout(silent):
    with LoomClient(silent, "lm_test", timeout=0.3) as loom:
        with pytest.raises(LoomConnectionError) as raised:
            loom.healthz()
    assert raised.value.code == "timeout" and raised.value.status == 0
    assert isinstance(raised.value.__cause__, httpx.TimeoutException)
    assert f"no answer from {silent}/healthz within the timeout" in str(raised.value)
