"""A real MCP client against the gateway's /mcp: the official Python SDK (`mcp` 2.x).

Run by host/tests/mcp_http.rs with the test venv's python:
    client.py URL TOKEN MODE REPO
MODE is `legacy` (initialize, Mcp-Session-Id) or `2026-07-28` (stateless); REPO is a mapped
repository's directory (a read-only root). Prints one JSON object: the negotiated version, the
tools as listed, and the answers of the calls.
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


async def main(url, token, mode, repo):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    report = {"mode": mode}
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        report["protocolVersion"] = str(client.session.protocol_version)
        report["tools"] = [wire(t) for t in (await client.list_tools()).tools]
        opened = wire(await client.call_tool("workspace_open", {"path": repo}))
        report["open"] = opened
        target = {"workspace": opened["structuredContent"]["workspace"]}
        report["read"] = wire(await client.call_tool("file_read", {**target, "path": "app.py"}))
        report["readAtMain"] = wire(
            await client.call_tool("file_read", {**target, "path": "app.py", "ref": "main"})
        )
        report["badPath"] = wire(
            await client.call_tool("file_read", {**target, "path": "../outside.txt"})
        )
        report["refused"] = wire(await client.call_tool("workspace_open", {"path": "/etc"}))
        report["unknownWorkspace"] = wire(
            await client.call_tool(
                "file_read", {"workspace": "ws_" + "0" * 32, "path": "app.py"}
            )
        )
        try:
            answer = await client.call_tool("no_such_tool", target)
            report["unknown"] = {"result": wire(answer)}
        except MCPError as error:
            report["unknown"] = {"code": error.code, "message": error.message}
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
