"""loci's MCP server tested end to end with the Python MCP SDK (another implementation):
over stdio (`loci mcp`) and over streamable HTTP (`loci serve`, at /mcp, with a key)."""

import asyncio
import json
import subprocess

import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOOLS = {"remember", "recall", "query", "timeline", "neighbours", "context"}


def text_of(result) -> str:
    assert not result.is_error, result
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def exercise(session: mcp.ClientSession) -> None:
    init = await session.initialize()
    assert init.server_info.name == "loci"
    tools = {t.name for t in (await session.list_tools()).tools}
    assert TOOLS <= tools, tools

    recalled = json.loads(text_of(await session.call_tool("recall", {"question": "who trades emeralds for sticks", "limit": 3})))
    assert recalled["snippets"], recalled
    assert "OFFERS" in recalled["snippets"][0]["text"]

    rows = json.loads(text_of(await session.call_tool("query", {"name": "find_trade", "params": {"want": "emerald", "give": "stick"}})))
    assert rows["rows"], rows

    remembered = json.loads(text_of(await session.call_tool("remember", {"text": "saw a creeper near the well", "session": "s1"})))
    assert remembered["events"] == 1
    timeline = json.loads(text_of(await session.call_tool("timeline", {"limit": 1})))
    assert "creeper" in timeline["events"][-1]["text"]

    neighbours = json.loads(text_of(await session.call_tool("neighbours", {"node": "base:first"})))
    assert neighbours["neighbors"]

    context = json.loads(text_of(await session.call_tool("context", {"budget": 300, "question": "where is home"})))
    assert context["tokens"] <= 300

    # A failing tool is a tool error with the server's message, not a broken session.
    bad = await session.call_tool("neighbours", {"node": "no-such-node"})
    assert bad.is_error and "not_found" in bad.content[0].text

    resources = (await session.list_resources()).resources
    uris = {str(r.uri) for r in resources}
    assert "loci://queries/find_trade" in uris, uris
    body = await session.read_resource("loci://queries/find_trade")
    spec = json.loads(body.contents[0].text)
    assert spec["params_schema"]["type"] == "object"
    assert "want" in spec["params_schema"]["properties"]


def test_mcp_over_stdio(world_store):
    binary, store = world_store

    async def run():
        params = mcp.StdioServerParameters(command=binary, args=["mcp", "--store", str(store)])
        async with mcp.stdio_client(params) as (read, write):
            async with mcp.ClientSession(read, write) as session:
                await exercise(session)

    asyncio.run(asyncio.wait_for(run(), 120))
    # The server closed the store cleanly: replay equals the live state.
    subprocess.run([binary, "replay", "--store", str(store), "--verify"], check=True, capture_output=True)


def test_mcp_over_http_with_a_key(world_store, tmp_path):
    binary, store = world_store
    key = "k" * 32
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    server = subprocess.Popen(
        [binary, "serve", "--store", str(store), "--addr", "127.0.0.1:0", "--key-file", str(key_file)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stderr.readline()
        addr = line.split("http://")[1].split()[0]

        async def run():
            client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
            async with client:
                async with streamable_http_client(f"http://{addr}/mcp", http_client=client) as (read, write):
                    async with mcp.ClientSession(read, write) as session:
                        await exercise(session)

        asyncio.run(asyncio.wait_for(run(), 120))

        async def unauthorized():
            client = create_mcp_http_client()
            async with client:
                r = await client.post(f"http://{addr}/mcp", json={})
                return r.status_code

        assert asyncio.run(unauthorized()) == 401
    finally:
        server.terminate()
        assert server.wait(30) == 0
    subprocess.run([binary, "replay", "--store", str(store), "--verify"], check=True, capture_output=True)
