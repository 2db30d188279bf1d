"""The TypeScript client (clients/typescript, issue 38) against a live server.

One test, in order: `npm ci` (skipped while node_modules was installed from the same
package-lock.json), the stale-types check (the committed src/generated/openapi.ts must be
what openapi-typescript makes of openapi/openapi.json), then, with dist/ removed
as on a fresh clone, `npm test` (its pretest builds dist/ with tsc, then `node --test` runs
clients/typescript/test/*.test.mjs) against a real API process
(`tests.support.live.live_api`, no worker, no LLM) with a fresh tenant and service key in
LOOM_URL / LOOM_KEY (LOOM_ADMIN_KEY for the tests that make a second tenant); then
`npm run test:types` (test/types/usage.ts type-checks against the built .d.ts) and the
packed tarball used by name in a consumer project. Node and npm
are required: without them the test fails and says so, it is never skipped.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.core.config import Settings
from tests.support.live import ROOT, live_api

pytestmark = pytest.mark.slow

PACKAGE = ROOT / "clients" / "typescript"
STAMP = PACKAGE / "node_modules" / ".loom-lock-sha256"
MIN_NODE = 18


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"`{name}` is not installed: the TypeScript client's tests need Node {MIN_NODE}+ "
            "and npm on PATH (https://nodejs.org); install them and run again",
            pytrace=False,
        )
    return path


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = subprocess.run(
        argv,
        cwd=PACKAGE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc.returncode, proc.stdout


def _must(argv: list[str], timeout: float) -> str:
    code, out = _run(argv, timeout)
    assert code == 0, f"`{' '.join(argv)}` in clients/typescript exited {code}:\n{out}"
    return out


def _install(npm: str) -> None:
    """`npm ci`, unless node_modules was installed from this very package-lock.json."""
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if STAMP.is_file() and STAMP.read_text().strip() == lock:
        return
    _must([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], timeout=600)
    STAMP.write_text(lock + "\n")


@contextlib.contextmanager
def _exclusive() -> Iterator[None]:
    """One install and build at a time in this checkout (two test runs may overlap)."""
    digest = hashlib.sha256(str(PACKAGE).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"loom-ts-client-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _packed(npm: str, node: str, tmp: Path) -> list[str]:
    """`npm pack` the built package, install the tarball into an empty ESM project and use
    it by its name there, from JavaScript and from TypeScript (its own .d.ts via `exports`).
    Returns what went wrong."""
    out = _must([npm, "pack", "--ignore-scripts", "--json", "--pack-destination", str(tmp)], 120)
    packed = json.loads(out[out.index("[") :])[0]
    files = {f["path"] for f in packed["files"]}
    problems = [
        f"the package lacks {need} (has: {sorted(files)})"
        for need in ("package.json", "README.md", "dist/index.js", "dist/index.d.ts")
        if need not in files
    ]
    problems += [f"the package ships a test file: {f}" for f in files if f.startswith("test/")]
    app = tmp / "app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "private": true, "type": "module"}\n')
    code, log = _run_in(
        app, [npm, "install", "--no-audit", "--no-fund", "--offline", str(tmp / packed["filename"])]
    )
    if code != 0:
        return [*problems, f"npm install of the packed tarball failed:\n{log}"]
    (app / "use.mjs").write_text(
        'import { LoomClient, NotFound } from "@loom-memory/client";\n'
        'const c = new LoomClient({ baseUrl: "http://x", apiKey: "k" });\n'
        "const e = new NotFound('m', { status: 404, code: 'c' });\n"
        "console.log(typeof c.appendMessages, e.name);\n"
    )
    code, log = _run_in(app, [node, "use.mjs"])
    if code != 0 or log.strip() != "function NotFound":
        problems.append(f"importing the installed package by name: exit {code}\n{log}")
    (app / "use.ts").write_text(
        'import { LoomClient, type Session } from "@loom-memory/client";\n'
        "const loom = new LoomClient();\n"
        "export const s: Promise<Session> = loom.createSession({ user_id: 'u' });\n"
        "// @ts-expect-error the API has no such field\n"
        "export const bad = loom.createSession({ user: 'u' });\n"
    )
    tsc = PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"
    argv = [node, str(tsc), "--noEmit", "--strict", "--module", "nodenext"]
    argv += ["--moduleResolution", "nodenext", "--lib", "es2022,dom", "use.ts"]
    code, log = _run_in(app, argv)
    if code != 0:
        problems.append(f"TypeScript in a consumer project does not find the types:\n{log}")
    return problems


def _run_in(cwd: Path, argv: list[str]) -> tuple[int, str]:
    proc = subprocess.run(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300
    )
    return proc.returncode, proc.stdout


def _tenant(base: str, settings: Settings) -> tuple[str, str]:
    assert settings.admin_key is not None
    admin = {"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"}
    with httpx.Client(base_url=base, headers=admin, timeout=30) as c:
        tenant = c.post("/v1/tenants", json={"name": f"ts-{uuid.uuid4().hex[:8]}"})
        assert tenant.status_code == 201, tenant.text
        key = c.post("/v1/api-keys", json={"tenant_id": tenant.json()["id"], "role": "service"})
        assert key.status_code == 201, key.text
    return tenant.json()["id"], key.json()["secret"]


def test_typescript_client_against_a_live_server(settings: Settings, tmp_path: Path) -> None:
    node, npm = _tool("node"), _tool("npm")
    version = _must([node, "--version"], timeout=30).strip()
    found = re.match(r"v(\d+)", version)
    major = int(found.group(1)) if found else 0
    assert major >= MIN_NODE, f"the TypeScript client needs Node {MIN_NODE}+, found {version}"

    problems = []
    # one run at a time in this checkout: another run's install or build would change
    # node_modules / dist under this one
    with _exclusive():
        _install(npm)
        code, out = _run([npm, "run", "--silent", "check:types"], timeout=120)
        if code != 0:
            problems.append(f"stale generated types (npm run check:types exited {code}):\n{out}")
        # as on a fresh clone: no dist/, which `npm test` builds first (its pretest script)
        shutil.rmtree(PACKAGE / "dist", ignore_errors=True)

        tests = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "test").glob("*.test.mjs"))
        assert len(tests) >= 5, tests
        with live_api(settings, LOOM_LLM_PROVIDER="none") as base:
            tenant_id, service_key = _tenant(base, settings)
            assert settings.admin_key is not None
            env = {
                **os.environ,
                "LOOM_URL": base,
                "LOOM_KEY": service_key,
                "LOOM_TENANT_ID": tenant_id,
                "LOOM_ADMIN_KEY": settings.admin_key.get_secret_value(),
                "NODE_OPTIONS": "",
            }
            started = time.monotonic()
            code, out = _run([npm, "test"], timeout=400, env=env)
            took = time.monotonic() - started
        if code == 0 or (PACKAGE / "dist" / "index.d.ts").is_file():
            code_types, out_types = _run([npm, "run", "--silent", "test:types"], timeout=300)
            if code_types != 0:
                problems.append(
                    f"the built types refuse test/types/usage.ts (exit {code_types}):\n{out_types}"
                )
            problems += _packed(npm, node, tmp_path)
    summary = "\n".join(
        line for line in out.splitlines() if re.match(r"# (tests|pass|fail|duration_ms) ", line)
    )
    print(f"npm test (build and node --test): {took:.1f} s\n{summary}")
    if code != 0:
        problems.append(f"npm test (without dist/) exited {code} after {took:.1f} s:\n{out}")
    else:
        assert re.search(r"^# pass [1-9]\d*$", out, re.M), out
        assert re.search(r"^# fail 0$", out, re.M), out
    assert not problems, "\n\n".join(problems)
