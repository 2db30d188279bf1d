"""A request the HTTP parser rejects (NUL or control bytes in a header, a malformed header
line) is answered by the server itself, before any ASGI app: with our protocols it is the
JSON error envelope, not uvicorn's plain text. Real uvicorn servers on free ports."""

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import uvicorn

from app.core.http_errors import EnvelopeH11Protocol, EnvelopeHTTPProtocol
from tests.support.live import free_port


async def _app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")],
        }
    )
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def _server(protocol) -> Iterator[int]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            _app, host="127.0.0.1", port=port, http=protocol, lifespan="off", log_level="critical"
        )
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, body = data.partition(b"\r\n\r\n")
                headers = dict(
                    line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:]
                )
                length = int({k.lower(): v for k, v in headers.items()}.get("content-length", "-1"))
                if 0 <= length <= len(body):
                    break
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    return status, {k.lower(): v for k, v in (x.split(": ", 1) for x in lines[1:])}, body


BAD_REQUESTS = [
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX Bad: value\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Bad\x00: value\r\n\r\n",
]


@pytest.mark.parametrize(
    "protocol", [EnvelopeHTTPProtocol, EnvelopeH11Protocol], ids=["auto", "h11"]
)
def test_parser_rejections_are_the_envelope(protocol):
    with _server(protocol) as port:
        status, _, body = _raw(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status == 200 and body == b"ok"
        extra = (
            [b"GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n"]
            if protocol is EnvelopeHTTPProtocol
            else []
        )  # h11 lets other controls through
        for request in BAD_REQUESTS + extra:
            status, headers, body = _raw(port, request)
            assert status == 400, (request, body)
            assert headers["content-type"] == "application/json"
            assert headers["connection"] == "close"
            err = json.loads(body)["error"]
            assert err["code"] == "invalid_http_request" and err["details"] is None


def test_plain_uvicorn_answers_plain_text():
    """Why the custom protocol is needed: the stock one answers before the app, in text."""
    with _server("auto") as port:
        status, headers, body = _raw(port, BAD_REQUESTS[0])
        assert status == 400 and headers["content-type"].startswith("text/plain")
