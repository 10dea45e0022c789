"""A line-driven MCP client (the official Python SDK, `mcp` 2.x) for the delegation test.

Run by host/tests/delegation_mcp.rs with the test venv's python:
    delegation.py URL TOKEN
It connects to URL (`/mcp`, `legacy` mode: initialize, Mcp-Session-Id) with the bearer TOKEN,
then reads one JSON request a line from stdin and writes one JSON answer a line to stdout:
- `{"op": "list"}` answers `{"tools": [...]}` (every tool, in `wire` form);
- `{"op": "call", "name": N, "arguments": {...}}` answers the `CallToolResult` in `wire` form
  (`structuredContent`, `isError`), or `{"rpcError": {"code", "message"}}` when the server
  answered the call with a JSON-RPC error (an unknown tool).
End of input ends the client. The Rust test drives the sequence (it must look at the disk, the
processes and the runs between calls) and asserts; this script asserts nothing.
"""

import asyncio
import json
import sys

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def wire(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def serve(client):
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        request = json.loads(line)
        try:
            if request["op"] == "list":
                answer = {"tools": [wire(t) for t in (await client.list_tools()).tools]}
            else:
                answer = wire(
                    await client.call_tool(request["name"], request.get("arguments", {}))
                )
        except MCPError as error:
            answer = {"rpcError": {"code": error.code, "message": error.message}}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


async def main(url, token):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        await serve(client)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
