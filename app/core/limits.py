"""Request limits applied before any route runs (by `app.core.edge`).

* Body size: the bytes actually received are counted, whatever the framing (Content-Length
  or `Transfer-Encoding: chunked`); over `LOOM_MAX_REQUEST_BYTES` is 413 and the app never
  sees the request, so nothing is stored. A Content-Length over the limit is refused before
  reading anything.
* Media type: a request with more than one `Content-Type` header is 400
  `ambiguous_content_type` (RFC 9110 allows one): with two, the parser and these checks
  could each read another, and a body checked as text would be parsed as JSON.
* JSON nesting: a body FastAPI parses as JSON (`application/json`, `application/*+json`:
  `is_json_type`, its reading) nested deeper than `LOOM_MAX_JSON_DEPTH` is 422
  `json_too_deep` naming the field, checked on the raw bytes before anything parses them
  (see `app.core.jsonlimits`).

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
    """Whether FastAPI parses a body of this media type as JSON: `application/json` or
    `application/*+json`, parameters ignored, read exactly as FastAPI reads it (the
    standard library's `email.message`: the type before the first `;`, stripped and
    lower-cased, is `text/plain` unless it holds one `/`). Every request asks, so a string
    split rather than a MIME parser; `tests/core/test_media_type.py` holds the two
    readings equal."""
    if not content_type:
        return False  # FastAPI's strict content type: no header, no JSON
    mime = content_type.partition(";")[0].strip().lower()
    if mime.count("/") != 1:
        return False
    main, sub = mime.split("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


def _ambiguous(count: int) -> JSONResponse:
    return error_response(
        400,
        "ambiguous_content_type",
        f"The request has {count} Content-Type headers; send one, which says how its body is read.",
    )


def _too_large(max_bytes: int) -> JSONResponse:
    return error_response(413, "payload_too_large", f"The body is over {max_bytes} bytes.")


async def read_body(scope: Scope, receive: Receive, send: Send, max_bytes: int) -> bytes | None:
    """The request's whole body, within the limits; None when it was refused (the answer
    is sent) or the client went away before sending it all."""
    content_type = None
    types = 0
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
            types += 1
    if types > 1:
        # one body, one reading: the parser (FastAPI, a lane) reads the first header and
        # these checks would read another, so neither is chosen
        await _ambiguous(types)(scope, receive, send)
        return None
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
