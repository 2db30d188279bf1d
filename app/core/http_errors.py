"""uvicorn HTTP protocols whose own 400 (a request the HTTP parser rejects) is the envelope.

A request line or header the parser refuses (a NUL or other control byte in a header, a
malformed header line, headers too large) never reaches the ASGI app, so no middleware or
exception handler can answer it: uvicorn writes a plain-text "Invalid HTTP request
received." and closes the connection. These subclasses write the same 400, closing the
connection too, with the JSON error envelope instead (`invalid_http_request`). `serve` must
pass `EnvelopeHTTPProtocol` to uvicorn (`http=`); the choice between httptools and h11
is uvicorn's own ("auto").
"""

import asyncio
import json

from uvicorn.protocols.http.h11_impl import H11Protocol

from app.core.errors import envelope

CODE = "invalid_http_request"
MESSAGE = (
    "The request could not be parsed as HTTP/1.1 (a malformed request line or header, "
    "a control character such as NUL in a header, or headers that are too large)."
)


def envelope_body(message: str = MESSAGE) -> bytes:
    return json.dumps(envelope(CODE, message), separators=(",", ":")).encode()


def _head(default_headers: list[tuple[bytes, bytes]], body: bytes) -> list[bytes]:
    out = [b"HTTP/1.1 400 Bad Request\r\n"]
    for name, value in default_headers:
        out.extend([name, b": ", value, b"\r\n"])
    out.extend(
        [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n",
            b"\r\n",
            body,
        ]
    )
    return out


class EnvelopeH11Protocol(H11Protocol):
    def send_400_response(self, msg: str) -> None:
        # Written directly: h11's state machine is in an error state after a bad request.
        body = envelope_body()
        self.transport.write(b"".join(_head(self.server_state.default_headers, body)))
        self.transport.close()


EnvelopeHTTPProtocol: type[asyncio.Protocol]
try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover  (httptools not installed: uvicorn uses h11)
    EnvelopeHTTPProtocol = EnvelopeH11Protocol
else:

    class EnvelopeHttpToolsProtocol(HttpToolsProtocol):
        def send_400_response(self, msg: str) -> None:
            body = envelope_body()
            self.transport.write(b"".join(_head(self.server_state.default_headers, body)))
            self.transport.close()

    EnvelopeHTTPProtocol = EnvelopeHttpToolsProtocol
