"""Request limits applied before any route runs (by `app.core.edge`).

* Body size: the bytes actually received are counted, whatever the framing (Content-Length
  or `Transfer-Encoding: chunked`); over `LOOM_MAX_REQUEST_BYTES` is 413 and the app never
  sees the request, so nothing is stored. A Content-Length over the limit is refused before
  reading anything.
* JSON nesting: a JSON body (`application/json`, `application/*+json`) nested deeper than
  `LOOM_MAX_JSON_DEPTH` is 422 `json_too_deep` naming the field, checked on the raw bytes
  before anything parses them (see `app.core.jsonlimits`).

The body is buffered here (every route reads its whole body anyway) and replayed to the app
as one message; later `receive` calls (disconnects, for streaming responses) pass through.
"""

import asyncio

from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from app.core import jsonlimits
from app.core.errors import error_response

# JSON bodies at least this big are depth-checked in a worker thread, off the event loop.
_THREAD_BYTES = 1024 * 1024
# The size of the body the app gets, in the ASGI scope (routes use it to move heavy work
# off the event loop).
BODY_BYTES_SCOPE_KEY = "loom.body_bytes"


def is_json_type(content_type: str | None) -> bool:
    """`application/json` or `application/*+json`, parameters ignored (every request asks,
    so a string split rather than a MIME parser)."""
    if not content_type:
        return False
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime == "application/json" or (
        mime.startswith("application/") and mime.endswith("+json")
    )


def _too_large(max_bytes: int) -> JSONResponse:
    return error_response(413, "payload_too_large", f"The body is over {max_bytes} bytes.")


async def read_body(scope: Scope, receive: Receive, send: Send, max_bytes: int) -> bytes | None:
    """The request's whole body, within the limits; None when it was refused (the answer
    is sent) or the client went away before sending it all."""
    content_type = None
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                declared = 0
            if declared > max_bytes:
                await _too_large(max_bytes)(scope, receive, send)
                return None
        elif name == b"content-type":
            content_type = value.decode("latin-1")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went away before sending its body
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            await _too_large(max_bytes)(scope, receive, send)
            return None
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    del chunks
    scope[BODY_BYTES_SCOPE_KEY] = len(body)
    if body and is_json_type(content_type):
        try:
            if len(body) >= _THREAD_BYTES:
                await asyncio.to_thread(jsonlimits.check_text, body)
            else:
                jsonlimits.check_text(body)
        except jsonlimits.JsonTooDeep as exc:
            resp = error_response(422, "json_too_deep", str(exc), [exc.detail(["body"])])
            await resp(scope, receive, send)
            return None
    return body


def replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for the app: the body as one message, then the client's (disconnects)."""
    replayed = False

    async def again() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
