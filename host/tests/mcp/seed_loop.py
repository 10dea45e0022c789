"""The seed's own loop through the official MCP Python SDK (`mcp` 2.x) against /mcp.

Run by host/tests/mcp_seed_loop.rs with the test venv's python:
    seed_loop.py URL TOKEN MODE RW_REPO RO_REPO OUTSIDE
MODE is `legacy` (initialize, Mcp-Session-Id) or `2026-07-28` (stateless). RW_REPO is a git
repository in a writable root holding `calc.py` and `test_calc.py` as the Rust test writes
them; RO_REPO one in a read-only root; OUTSIDE a directory in no root. The loop writes into
RW_REPO, so each run needs its own copy.

Prints one JSON object: every answer as the SDK parsed it (`wire` form), keyed by step, and the
outcome of a client without the token (`unauthorized`). The Rust test asserts on it; this script
asserts nothing, so a wrong answer shows there with the whole report.
"""

import asyncio
import json
import sys

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

# The header says line 6; the old side (the blank line before `def mul`) is at line 11 of
# calc.py: moved context, offset 5.
MOVED_PATCH = (
    "--- a/calc.py\n"
    "+++ b/calc.py\n"
    "@@ -6,3 +6,3 @@\n"
    " \n"
    " def mul(a, b):\n"
    "-    return a * b\n"
    "+    return b * a\n"
)

# Where the header says (no offset); applied with `dryRun: true` only.
DRY_PATCH = """--- a/calc.py
+++ b/calc.py
@@ -16,2 +16,2 @@
 def div(a, b):
-    return a / b
+    return a // b
"""

NEW_TEST = """import unittest

from calc import div


class DivTest(unittest.TestCase):
    def test_div(self):
        self.assertEqual(div(6, 3), 2)
"""


def wire(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def loop(client, rw_repo, ro_repo, outside):
    report = {"protocolVersion": str(client.session.protocol_version)}
    report["tools"] = [wire(t) for t in (await client.list_tools()).tools]

    async def call(name, arguments):
        return wire(await client.call_tool(name, arguments))

    opened = await call("workspace_open", {"path": rw_repo})
    report["open"] = opened
    ws = {"workspace": opened["structuredContent"]["workspace"]}
    report["read"] = await call("file_read", {**ws, "path": "calc.py"})
    report["patch"] = await call("file_apply_patch", {**ws, "patch": MOVED_PATCH})
    report["dryRun"] = await call(
        "file_apply_patch", {**ws, "patch": DRY_PATCH, "dryRun": True}
    )
    report["write"] = await call(
        "file_write", {**ws, "path": "test_div.py", "content": NEW_TEST}
    )
    report["run"] = await call(
        "process_run",
        {**ws, "executable": "python3", "args": ["-B", "-m", "unittest", "-v"]},
    )
    report["diff"] = await call("git_diff", ws)
    report["status"] = await call("git_status", ws)

    ro = await call("workspace_open", {"path": ro_repo})
    report["openRo"] = ro
    report["writeRo"] = await call(
        "file_write",
        {
            "workspace": ro["structuredContent"]["workspace"],
            "path": "made.txt",
            "content": "no\n",
        },
    )
    report["openEtc"] = await call("workspace_open", {"path": "/etc"})
    report["openOutside"] = await call("workspace_open", {"path": outside})

    long = await call(
        "process_run",
        {
            **ws,
            "executable": "sh",
            "args": ["-c", "echo start; sleep 3; echo end"],
            "waitSeconds": 1,
        },
    )
    report["long"] = long
    out = long["structuredContent"]["output"]
    report["longOutput"] = await call(
        "process_output",
        {
            **ws,
            "process": out["process"],
            "stdoutCursor": out["stdoutCursor"],
            "stderrCursor": out["stderrCursor"],
            "waitSeconds": 20,
        },
    )
    return report


async def unauthorized(url, mode):
    """A client with no Authorization header: the SDK raises; which status the server sent."""
    statuses = []

    async def seen(response):
        statuses.append(response.status_code)

    http = httpx2.AsyncClient(event_hooks={"response": [seen]})
    try:
        async with asyncio.timeout(15):
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                await client.list_tools()
        raised = None
    except BaseException as error:  # an ExceptionGroup from the SDK's task group, or MCPError
        raised = f"{type(error).__name__}: {error}"
    return {"raised": raised, "statuses": statuses}


async def main(url, token, mode, rw_repo, ro_repo, outside):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        report = await loop(client, rw_repo, ro_repo, outside)
    report["mode"] = mode
    report["unauthorized"] = await unauthorized(url, mode)
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
