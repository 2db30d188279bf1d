"""A small keep-alive HTTP/1.1 load generator on asyncio streams.

httpx costs more CPU per request than the server under test; on a 2-core machine that
would measure the client. This sends pre-built requests over N persistent connections.
"""

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Result:
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        xs = sorted(self.latencies_ms)
        return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "rps": round(self.rps, 1),
            "p50_ms": round(self.pct(50), 3),
            "p99_ms": round(self.pct(99), 3),
            "mean_ms": round(statistics.fmean(self.latencies_ms), 3) if self.latencies_ms else None,
        }


def build_request(
    method: str, path: str, host: str, headers: dict[str, str], body: Any = None
) -> bytes:
    payload = (
        b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: keep-alive"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None:
        if not any(k.lower() == "content-type" for k in headers):
            lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(payload)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        lname = name.strip().lower()
        if lname == b"content-length":
            length = int(value.strip())
        elif lname == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
        return status, body
    return status, await reader.readexactly(length) if length else b""


async def run(
    host: str,
    port: int,
    make_request: Callable[[int], bytes],
    *,
    clients: int,
    total: int | None = None,
    duration: float | None = None,
    ok: Callable[[int], bool] = lambda s: 200 <= s < 300,
    warmup: int = 0,
) -> Result:
    """Send requests from `clients` connections until `total` are done or `duration` passes."""
    latencies: list[float] = []
    errors = 0
    issued = 0
    deadline: float | None = None
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def connect() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        for _ in range(warmup):
            writer.write(make_request(-1))
            await _read_response(reader)
        conns.append((reader, writer))

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal issued, errors
        while True:
            if total is not None and issued >= total:
                return
            if deadline is not None and time.perf_counter() >= deadline:
                return
            n = issued
            issued += 1
            data = make_request(n)
            t0 = time.perf_counter()
            writer.write(data)
            status, _ = await _read_response(reader)
            latencies.append((time.perf_counter() - t0) * 1000)
            if not ok(status):
                errors += 1

    await asyncio.gather(*[connect() for _ in range(clients)])  # warm up, then time
    start = time.perf_counter()
    if duration is not None:
        deadline = start + duration
    try:
        await asyncio.gather(*[worker(r, w) for r, w in conns])
    finally:
        for _, w in conns:
            w.close()
    return Result(len(latencies), errors, time.perf_counter() - start, latencies)


async def measure(
    host: str,
    port: int,
    reqs: list,
    *,
    clients: int,
    seconds: float,
    counter: bool = False,
    mark_header: str | None = None,
    seed: int = 1,
):
    """The fallback when wrk is missing: the same contract as `bench.wrk.run` (random
    request of `reqs` per request, or a new `<path><client>-<n>` per request in counter
    mode), from this process. It competes with the server for the CPU, so its figures are
    lower than wrk's; the report says which tool measured. `mark_header` is accepted for
    the same signature but not recorded (no header_values)."""
    import random

    from bench.wrk import Measured

    rng = random.Random(seed)
    host_h = f"{host}:{port}"
    built = [build_request(r.method, r.path, host_h, r.headers, r.body) for r in reqs]
    count = 0
    statuses: dict[str, int] = {}

    def make(n: int) -> bytes:
        nonlocal count
        if counter:
            count += 1
            r = reqs[0]
            return build_request(r.method, f"{r.path}0-{count}", host_h, r.headers, r.body)
        return built[rng.randrange(len(built))]

    def ok(status: int) -> bool:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        return 200 <= status < 300

    res = await run(host, port, make, clients=clients, duration=seconds, ok=ok)
    return Measured(
        tool="asyncio-loadgen",
        clients=clients,
        requests=res.requests,
        seconds=res.seconds,
        errors=res.errors,
        p50_ms=res.pct(50),
        p90_ms=res.pct(90),
        p99_ms=res.pct(99),
        mean_ms=statistics.fmean(res.latencies_ms) if res.latencies_ms else 0.0,
        max_ms=max(res.latencies_ms, default=0.0),
        statuses=statuses,
    )
