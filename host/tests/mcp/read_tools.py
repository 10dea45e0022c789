"""Drive the gateway's workspace read tools through the official Python MCP SDK.

Run by host/tests/mcp_read_tools.rs with the test venv's python:
    read_tools.py URL TOKEN DIR CALLS
CALLS is a JSON array of [tool, arguments]; each call gets the `workspace` handle of DIR.
Prints one JSON object: `tools` (the listed names) and `answers` (each call's result).
"""

import asyncio
import json
import sys

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client


def wire(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main(url, token, directory, calls):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    report = {}
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        report["tools"] = [t.name for t in (await client.list_tools()).tools]
        opened = wire(await client.call_tool("workspace_open", {"path": directory}))
        handle = opened["structuredContent"]["workspace"]
        answers = []
        for name, arguments in json.loads(calls):
            answer = wire(await client.call_tool(name, {"workspace": handle, **arguments}))
            answers.append(answer)
        report["answers"] = answers
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
