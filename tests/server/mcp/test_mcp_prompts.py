"""The prompt menu (prompts/list, prompts/get) and completion/complete, through a real MCP client."""

from __future__ import annotations

import re

import pytest
from mcp.types import PromptReference, ResourceTemplateReference
from support.clients import call_ok

pytestmark = pytest.mark.anyio


async def _seed(client) -> None:
    for content, project, category in [
        ("The billing service stores invoices in PostgreSQL 16", "billing", "decisions"),
        ("Always write migrations as plain SQL files in the billing repo", "billing", "preferences"),
        ("Open question: should refunds be synchronous or queued?", "billing", None),
        ("Lisa walks her dog Pixel every morning at seven", "personal", None),
    ]:
        await call_ok(client, "remember", {"content": content, "project": project, "category": category})


async def test_the_three_prompts_are_listed_and_render_their_templates(connect):
    async with connect() as client:
        await _seed(client)
        listed = (await client.list_prompts()).prompts
        assert [p.name for p in listed] == ["recall-context", "remember-conversation", "project-brief"]
        args = {p.name: [(a.name, a.required) for a in p.arguments or []] for p in listed}
        assert args["recall-context"] == [("topic", True), ("project", False)]
        assert args["project-brief"] == [("project", False)]
        got = await client.get_prompt(
            "recall-context", {"topic": "where are invoices stored", "project": "billing"}
        )
        text = got.messages[0].content.text
        assert "<memories>" in text and "invoices in PostgreSQL 16" in text and "Pixel" not in text
        got = await client.get_prompt("remember-conversation", {"project": "billing"})
        text = got.messages[0].content.text
        assert '"billing"' in text and "`remember`" in text and "One fact per call" in text
        assert re.search(r'source\s+"chat:\d{4}-\d\d-\d\dT\d\d:\d\dZ"', text)
        got = await client.get_prompt("project-brief", {"project": "billing"})
        text = got.messages[0].content.text
        facts = text.split("\n<facts>\n")[1].split("</facts>")[0]
        assert "PostgreSQL 16" in facts
        assert "plain SQL" in text.split("\n<preferences>\n")[1]
        assert "refunds" in text.split("\n<questions>\n")[1]


async def test_completion_offers_project_names_and_the_projects_topics(connect):
    async with connect() as client:
        await _seed(client)
        ref = PromptReference(type="ref/prompt", name="project-brief")
        done = await client.complete(ref, {"name": "project", "value": "bi"})
        assert done.completion.values == ["billing"]
        done = await client.complete(ref, {"name": "project", "value": ""})
        assert done.completion.values == ["billing", "personal"] and done.completion.total == 2
        topic_ref = PromptReference(type="ref/prompt", name="recall-context")
        done = await client.complete(topic_ref, {"name": "topic", "value": "dec"}, {"project": "billing"})
        assert "decisions" in done.completion.values
        template = ResourceTemplateReference(
            type="ref/resource", uri="memlane://projects/{project}/categories"
        )
        done = await client.complete(template, {"name": "project", "value": "pers"})
        assert done.completion.values == ["personal"]
