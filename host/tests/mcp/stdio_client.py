"""A real MCP client launching `review-agent-gateway mcp` on stdio: the official Python SDK.

Run by host/tests/mcp_stdio.rs with the test venv's python:
    stdio_client.py BINARY MODE REPO
with the gateway's home in the environment (REVIEW_AGENT_GATEWAY_HOME). MODE is `legacy` or
`2026-07-28`. Prints one JSON object: the negotiated version, the tool names and two calls.
"""

import asyncio
import json
import os
import sys

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters


def wire(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main(binary, mode, repo):
    params = StdioServerParameters(
        command=binary,
        args=["mcp"],
        env={"REVIEW_AGENT_GATEWAY_HOME": os.environ["REVIEW_AGENT_GATEWAY_HOME"]},
    )
    report = {"mode": mode}
    async with Client(params, mode=mode) as client:
        report["protocolVersion"] = str(client.session.protocol_version)
        report["tools"] = [t.name for t in (await client.list_tools()).tools]
        opened = await client.call_tool("workspace_open", {"path": repo})
        target = {"workspace": wire(opened)["structuredContent"]["workspace"]}
        report["read"] = wire(await client.call_tool("file_read", {**target, "path": "app.py"}))
        report["badPath"] = wire(
            await client.call_tool("file_read", {**target, "path": "../outside.txt"})
        )
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
