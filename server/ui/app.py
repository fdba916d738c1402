"""The memory browser's routes: a Starlette app rendering Jinja2 templates (autoescaped).

Every page reads through the Engine methods the MCP tools and the CLI use (``recall``, ``get``,
``update``, ``forget``, ``stats``) and the store's read API for browsing
(``pipeline/store/browse.py``, ``entity_browse.py``); there is no second data path. Changes are POST
forms checked for CSRF (``security.py``); GET never changes anything, and the browser's own recalls
do not count as accesses (``count_accesses`` false): looking at a memory is not the assistant
using it.

Each page is a function of the request and the engine; ``create_app`` registers them under
``handler`` and puts what they share (the engine, the recall log, CSRF, templates) on ``app.state``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memlane.pipeline import validate
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import (
    DatabaseUnavailable,
    InvalidInput,
    MemlaneError,
    NotFound,
    StoreError,
)
from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.request import Filters
from memlane.pipeline.store.browse import SORT_KEYS
from memlane.pipeline.store.entity_browse import entity_id
from memlane.pipeline.validate import FACT_TYPES
from memlane.server.ui import charts, forms, graph_svg
from memlane.server.ui.metrics import RECALLS, RecallLog
from memlane.server.ui.security import (
    COOKIE,
    FIELD,
    Csrf,
    SecurityHeaders,
)

log = logging.getLogger("memlane.ui")

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 50
SEARCH_SIZE = 20  # a project page's search lists this many (the page's limit, when given)
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # memories are user text: every {{ }} is escaped, in every template
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = lambda s: quote(str(s), safe="")
    env.filters["when"] = lambda d: d.strftime("%Y-%m-%d %H:%M") if d else "—"
    env.filters["ms"] = lambda x: f"{x:.1f}" if x < 100 else f"{x:.0f}"
    env.filters["pretty"] = lambda o: json.dumps(o, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    env.filters["short"] = lambda s, n=140: s if len(s) <= n else s[: n - 1] + "…"
    env.globals["status_kind"] = charts.status_kind
    return env


def _root(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/")


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    state = request.app.state
    cookie = request.cookies.get(COOKIE)
    new_cookie = None if cookie else Csrf.new_cookie()
    html = state.templates.get_template(template).render(
        root=_root(request),
        path=request.url.path,
        csrf_field=FIELD,
        csrf_token=state.csrf.token_for(cookie or new_cookie),
        **{"nav": "", **context},
    )
    response = HTMLResponse(html, status_code=status)
    if new_cookie:
        response.set_cookie(COOKIE, new_cookie, path=_root(request) or "/", httponly=True, samesite="strict")
    return response


def error(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    return page(request, "error.html", status=status, title=title, message=message)


def handler(fn: Callable[[Request, Engine], Awaitable[Response]]):
    """Run a page with the engine, turning memlane's errors into pages that say what to do."""

    async def endpoint(request: Request) -> Response:
        try:
            engine = await request.app.state.get_engine()
        except Exception as e:  # the database could not start: every page would fail the same
            log.warning("memory browser: engine unavailable: %s", e)
            return error(request, 503, "memlane is not ready", f"The database is not available: {e}")
        try:
            return await fn(request, engine)
        except forms.BadRequest as e:
            return error(request, 400, "That request cannot be answered", str(e))
        except InvalidInput as e:
            return error(request, 400, "That request cannot be answered", str(e))
        except NotFound as e:
            return error(request, 404, "Not found", str(e))
        except (DatabaseUnavailable, StoreError) as e:
            return error(request, 503, "The database failed", str(e))
        except MemlaneError as e:
            return error(request, 500, "memlane failed", str(e))

    return endpoint


async def checked_form(request: Request) -> dict[str, Any] | Response:
    form = await request.form()
    why = request.app.state.csrf.check(request, form.get(FIELD))
    if why:
        return error(
            request, 403, "Change refused", f"Nothing was changed: {why}. Reload the page and try again."
        )
    return {k: v for k, v in form.multi_items()}


def redirect(request: Request, path: str) -> RedirectResponse:
    return RedirectResponse(_root(request) + path, status_code=303)


async def not_found(request: Request, exc: Exception) -> Response:
    # Starlette hands its 404/405 handlers an HTTPException; typed as it registers them.
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    if status == 405:
        return error(request, 405, "Method not allowed", "This address does not accept that method.")
    return error(request, status, "Not found", f"Nothing lives at {request.url.path}.")


def _filters(engine: Engine, **values: Any) -> Filters:
    """A page's filters, checked as a recall's are (``Filters``)."""
    return Filters.parse(engine.config, values)


async def _project_size(engine: Engine, name: str) -> int:
    """The memories of the project a page names (0: no such project, or a name no project has)."""
    if not name.strip():
        return 0
    return await engine.store.project_size(validate.project_name(name, engine.config.default_project))


# -- pages ------------------------------------------------------------------------------------------


async def projects(request: Request, engine: Engine) -> Response:
    rows = []
    store = engine.store
    for p in await store.project_summaries():
        newest = await store.browse(_filters(engine, projects=[p.project]), limit=3)
        rows.append(
            {
                "project": p.project,
                "memories": p.memories,
                "categories": (await store.project_categories(p.project))[:6],
                "newest": newest.memories,
                "recalled": await store.most_recalled(p.project, 3),
            }
        )
    return page(request, "projects.html", title="Projects", nav="projects", projects=rows)


async def project(request: Request, engine: Engine) -> Response:
    name = request.path_params["project"]
    size = await _project_size(engine, name)
    if size == 0:
        return error(request, 404, "Not found", f"There is no project {name!r} (it has no memories).")
    qp = request.query_params
    q = qp.get("q", "").strip()
    category = qp.get("category") or None
    # Memories without a category: a parameter of its own, since any text could be a category's name.
    uncategorized = forms.choice(qp.get("uncategorized"), "uncategorized", ("", "1"), "") == "1"
    if uncategorized and category:
        raise forms.BadRequest("give a category or ask for memories without one (uncategorized=1), not both")
    tags = [t.strip() for t in ",".join(qp.getlist("tag")).split(",") if t.strip()]
    pinned = {"": None, "yes": True, "no": False}.get(qp.get("pinned", ""), "bad")
    if pinned == "bad":
        raise forms.BadRequest(f"pinned must be yes, no or empty; got {qp.get('pinned')!r}")
    fact_type = forms.choice(qp.get("fact_type"), "fact_type", FACT_TYPES, "")
    topic = qp.get("topic", "").strip().lower()
    if len(topic) > 64:
        raise forms.BadRequest(f"topic must be a topic name of at most 64 characters; got {topic[:70]!r}…")
    filters = {
        "q": q,
        "sort": forms.choice(qp.get("sort"), "sort", list(SORT_KEYS), "created"),
        "order": forms.choice(qp.get("order"), "order", ("desc", "asc"), "desc"),
        "category": category or "",
        "uncategorized": "1" if uncategorized else "",
        "tag": ", ".join(tags),
        "pinned": qp.get("pinned", ""),
        "topic": topic,
        "fact_type": fact_type,
        "since": qp.get("since", ""),
        "until": qp.get("until", ""),
        # Replaced memories (superseded by a newer one) are listed only when asked for.
        "replaced": forms.choice(qp.get("replaced"), "replaced", ("", "shown"), ""),
    }
    limit = forms.whole_number(qp.get("limit"), "limit", PAGE_SIZE, 1, 500)
    context: dict[str, Any] = {
        "title": name,
        "nav": "projects",
        "project": name,
        "size": size,
        "filters": filters,
        # Names only: counting them would read the whole project on every page.
        "categories": await engine.store.category_names(name),
        "topics": await engine.store.project_topics(
            name, [t.name for t in engine.config.topics.custom_topics]
        ),
        "fact_types": FACT_TYPES,
        "notice": {"forgotten": "The memory was forgotten."}.get(qp.get("done", ""), ""),
    }
    if q:
        # Search is recall itself (all nine stages), so the list shows what the assistant would get.
        result = await engine.recall(
            {
                "query": q,
                "project": name,
                # A list to look at: its page's size, checked by recall as the tool's limit is.
                "limit": limit if "limit" in qp else SEARCH_SIZE,
                "max_tokens": 10**9,  # a list to look at, not a context window: no token budget
                "category": category,
                "tags": tags,
                "topics": [topic] if topic else None,
                "fact_types": [fact_type] if fact_type else None,
                "explain": True,
                "count_accesses": False,
            }
        )
        request.app.state.recalls.record(result.trace, source="ui")
        # Recall has no "no category" filter (its filters are the tools'): the page drops the others.
        context["results"] = [r for r in result.memories if not uncategorized or r[0].category is None]
        context["total_ms"] = result.trace.total_ms
    else:
        cursor, before = qp.get("cursor") or None, qp.get("before") or None
        browse = await engine.store.browse(
            _filters(
                engine,
                projects=[name],
                category=category,
                tags=tags,
                pinned=pinned,
                topics=[topic] if topic else None,
                fact_types=[fact_type] if fact_type else None,
                since=filters["since"] or None,
                until=filters["until"] or None,
            ),
            sort=filters["sort"],
            descending=filters["order"] == "desc",
            cursor=cursor,
            before=before,
            limit=limit,
            current_only=filters["replaced"] != "shown",
            uncategorized=uncategorized,
        )
        context["memories"] = browse.memories
        keep: dict[str, Any] = {k: v for k, v in filters.items() if v and k != "q"}
        if limit != PAGE_SIZE:
            keep["limit"] = limit
        context["first_page"] = urlencode(keep) if browse.prev_cursor else None
        context["prev_page"] = (
            urlencode({**keep, "before": browse.prev_cursor}) if browse.prev_cursor else None
        )
        context["next_page"] = (
            urlencode({**keep, "cursor": browse.next_cursor}) if browse.next_cursor else None
        )
    return page(request, "project.html", **context)


async def memory(request: Request, engine: Engine) -> Response:
    # The memory and its past (what it superseded, what supersedes it now, the contents updates
    # replaced), as `memlane history` reads them.
    past = await engine.history(request.path_params["id"])
    m = past["memory"]
    notice = {"saved": "Saved.", "unchanged": "Nothing was changed."}.get(
        request.query_params.get("done", ""), ""
    )
    store = engine.store
    entities = [e for _, e in await store.memory_entities([m.id])]
    links = await store.memory_links(m.id, 50)
    root = _root(request)
    nodes = [graph_svg.Node(f"m:{m.id}", m.content, f"{root}/memories/{m.id}", "memory", 0)]
    edges = []
    for link in links:
        nodes.append(
            graph_svg.Node(
                f"m:{link.memory.id}", link.memory.content, f"{root}/memories/{link.memory.id}", "memory", 1
            )
        )
        edges.append((f"m:{m.id}", f"m:{link.memory.id}", link.kind))
    for e in entities:
        nodes.append(graph_svg.Node(f"e:{e.id}", e.name, f"{root}/entities/{e.id}", "entity", 1))
        edges.append((f"m:{m.id}", f"e:{e.id}", "mentions"))
    # The second hop: a few other memories that mention its first entities (one index read each).
    for e in entities[:8]:
        others, _ = await store.entity_memories(e.id, limit=4)
        for o in others:
            if o.id != m.id:
                nodes.append(graph_svg.Node(f"m:{o.id}", o.content, f"{root}/memories/{o.id}", "memory", 2))
                edges.append((f"m:{o.id}", f"e:{e.id}", "mentions"))
    graph = graph_svg.bounded(nodes, edges)
    return page(
        request,
        "memory.html",
        title="Memory",
        nav="projects",
        m=m,
        notice=notice,
        entities=entities,
        links=links,
        earlier=past["supersedes"],
        later=past["superseded_by"],
        versions=past["versions"],
        graph=graph,
        svg=graph_svg.render(graph, "The memory's neighbourhood"),
        legend=graph_svg.legend(graph),
    )


async def entities(request: Request, engine: Engine) -> Response:
    name = request.path_params["project"]
    if await _project_size(engine, name) == 0:
        return error(request, 404, "Not found", f"There is no project {name!r} (it has no memories).")
    qp = request.query_params
    q = qp.get("q", "").strip()
    limit = forms.whole_number(qp.get("limit"), "limit", PAGE_SIZE, 1, 500)
    result = await engine.store.project_entities(name, q=q, after=qp.get("after") or None, limit=limit)
    keep = {k: v for k, v in {"q": q, "limit": limit if limit != PAGE_SIZE else ""}.items() if v}
    return page(
        request,
        "entities.html",
        title=f"Entities · {name}",
        nav="projects",
        project=name,
        q=q,
        entities=result.entities,
        first_page=urlencode(keep) if qp.get("after") else None,
        next_page=urlencode({**keep, "after": result.next_cursor}) if result.next_cursor else None,
    )


async def entity(request: Request, engine: Engine) -> Response:
    store = engine.store
    e = await store.entity(entity_id(request.path_params["id"]))
    cursor = request.query_params.get("cursor") or None
    memories, next_cursor = await store.entity_memories(e.id, cursor=cursor, limit=20)
    related = await store.co_occurring(e.id, 10)
    root = _root(request)
    centre = f"e:{e.id}"
    nodes = [graph_svg.Node(centre, e.name, f"{root}/entities/{e.id}", "entity", 0)]
    edges = []
    for m in memories:
        nodes.append(graph_svg.Node(f"m:{m.id}", m.content, f"{root}/memories/{m.id}", "memory", 1))
        edges.append((f"m:{m.id}", centre, "mentions"))
    for m_id, other in await store.memory_entities([m.id for m in memories]):
        if other.id != e.id:
            nodes.append(
                graph_svg.Node(f"e:{other.id}", other.name, f"{root}/entities/{other.id}", "entity", 2)
            )
            edges.append((f"m:{m_id}", f"e:{other.id}", "mentions"))
    for other, _ in related:
        nodes.append(graph_svg.Node(f"e:{other.id}", other.name, f"{root}/entities/{other.id}", "entity", 2))
    graph = graph_svg.bounded(nodes, edges)
    return page(
        request,
        "entity.html",
        title=e.name,
        nav="projects",
        e=e,
        memories=memories,
        related=related,
        next_page=urlencode({"cursor": next_cursor}) if next_cursor else None,
        first_page=cursor is not None,
        graph=graph,
        svg=graph_svg.render(graph, f"The neighbourhood of {e.name}"),
        legend=graph_svg.legend(graph),
    )


async def edit(request: Request, engine: Engine) -> Response:
    form = await checked_form(request)
    if isinstance(form, Response):
        return form
    m = await engine.get(request.path_params["id"])
    changes = forms.edit_changes(m, form)
    if not changes:
        return redirect(request, f"/memories/{m.id}?done=unchanged")
    await engine.update(m.id, changes)
    return redirect(request, f"/memories/{m.id}?done=saved")


async def pin(request: Request, engine: Engine) -> Response:
    form = await checked_form(request)
    if isinstance(form, Response):
        return form
    if form.get("pinned") not in ("true", "false"):
        raise forms.BadRequest("pinned must be true or false")
    m = await engine.update(request.path_params["id"], {"pinned": form["pinned"] == "true"})
    return redirect(request, f"/memories/{m.id}?done=saved")


async def priority(request: Request, engine: Engine) -> Response:
    form = await checked_form(request)
    if isinstance(form, Response):
        return form
    value = forms.whole_number(str(form.get("priority", "")) or None, "priority", -1, 1, 5)
    if value == -1:
        raise forms.BadRequest("priority is missing: give a number from 1 to 5")
    m = await engine.update(request.path_params["id"], {"priority": value})
    return redirect(request, f"/memories/{m.id}?done=saved")


async def forget_confirm(request: Request, engine: Engine) -> Response:
    m = await engine.get(request.path_params["id"])
    return page(request, "forget.html", title="Forget this memory?", nav="projects", m=m)


async def forget(request: Request, engine: Engine) -> Response:
    form = await checked_form(request)
    if isinstance(form, Response):
        return form
    if form.get("confirm") != "yes":
        raise forms.BadRequest("forgetting needs the confirmation (confirm=yes); nothing was changed")
    m = await engine.forget(request.path_params["id"])
    if await engine.store.project_size(m.project) == 0:  # its last memory: the project is gone too
        return redirect(request, "/")
    return redirect(request, f"/projects/{quote(m.project, safe='')}?done=forgotten")


async def recall(request: Request, engine: Engine, query: type[RecallQuery] = RecallQuery) -> Response:
    """The recall explorer: its form is ``query``'s parameters (``forms.request_form``), what was
    not given is the engine's default, and ``query`` checks the rest as the recall tool's are."""
    qp = request.query_params
    given = dict(qp)
    if "query" not in given and "q" in given:  # the page's earlier name for the question
        given["query"] = given["q"]
    defaults = query.parse(engine.config, {"query": "?"})
    fields, data = forms.request_form(query, given, qp.getlist, defaults)
    context: dict[str, Any] = {
        "title": "Recall explorer",
        "nav": "recall",
        "fields": fields,
        "projects": [p.project for p in await engine.store.project_summaries()],
    }
    if str(data.get("query", "")).strip():
        # The page looks without counting, and always shows why (the trace).
        result = await engine.recall({**data, "explain": True, "count_accesses": False})
        trace = result.trace.as_dict()
        request.app.state.recalls.record(trace, source="ui")
        returned = {m.id: i + 1 for i, (m, _) in enumerate(result.memories)}
        arms: list[str] = []  # every arm any candidate has a score on, in order of appearance
        for c in result.ranked:
            arms.extend(a for a in c.arm_scores if a not in arms)
        trace, arm_hits = _arm_hits(trace, result)
        context.update(
            result=result,
            trace=trace,
            arm_hits=arm_hits,
            picture=charts.trace_picture(trace),
            arms=arms,
            ranked=result.ranked[:100],
            returned=returned,
        )
    return page(request, "recall.html", **context)


def _arm_hits(trace: dict[str, Any], result) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Each arm's own ranked list from the retrieval stage's ``detail.hits`` (an explained recall),
    with the memory when it is a candidate and, for the graph arm, the entry points and paths that
    reached it (``detail.graph.reached``). Returns the trace without those two (the stage table
    would print them as JSON) and the lists, in the order retrieval made them."""
    memories = {str(c.memory.id): c.memory for c in result.ranked}
    stages = []
    hits: dict[str, list] = {}
    reached: dict[str, list] = {}
    for s in trace.get("stages", []):
        detail = s.get("detail") or {}
        if "hits" in detail:
            detail = dict(detail)
            hits = detail.pop("hits")
            if isinstance(detail.get("graph"), dict) and "reached" in detail["graph"]:
                detail["graph"] = {k: v for k, v in detail["graph"].items() if k != "reached"}
                reached = s["detail"]["graph"]["reached"]
            s = {**s, "detail": detail}
        stages.append(s)
    lists = [
        {
            "arm": name,
            "hits": [
                {
                    "rank": i,
                    "id": mid,
                    "score": score,
                    "memory": memories.get(mid),
                    "reached": reached.get(mid, []),
                }
                for i, (mid, score) in enumerate(found, 1)
            ],
        }
        for name, found in hits.items()
    ]
    return {**trace, "stages": stages}, lists


async def stats(request: Request, engine: Engine) -> Response:
    data = await engine.stats()
    unit, points = charts.bucket_counts(await engine.store.created_per_day(None))
    summary = request.app.state.recalls.summary()
    return page(
        request,
        "stats.html",
        title="Stats",
        nav="stats",
        stats=data,
        unit=unit,
        chart=charts.bar_chart(points),
        summary=summary,
        latency=charts.latency_chart(summary),
    )


def create_app(
    get_engine: Callable[[], Awaitable[Engine]],
    *,
    allowed_hosts: list[str] | None = None,
    recalls: RecallLog = RECALLS,
    csrf_secret: bytes | None = None,
    lifespan=None,
    recall_query: type[RecallQuery] = RecallQuery,
) -> Starlette:
    """The browser as an ASGI app. ``get_engine`` returns the opened engine (waiting for start-up
    when needed). ``allowed_hosts``: Host headers to answer (default: loopback names only, so a
    web page cannot reach it through DNS rebinding). The pages read all four from ``app.state``.
    ``recall_query``: the request value the recall explorer's form is made from (a test gives a
    variant)."""
    routes = [
        Route("/", handler(projects), name="projects"),
        # Before the project page, whose path parameter would take "/entities" too.
        Route("/projects/{project:path}/entities", handler(entities), name="entities"),
        Route("/entities/{id}", handler(entity), name="entity"),
        Route("/projects/{project:path}", handler(project), name="project"),
        Route("/memories/{id}", handler(memory), name="memory"),
        Route("/memories/{id}/edit", handler(edit), methods=["POST"]),
        Route("/memories/{id}/pin", handler(pin), methods=["POST"]),
        Route("/memories/{id}/priority", handler(priority), methods=["POST"]),
        Route("/memories/{id}/forget", handler(forget_confirm), methods=["GET"]),
        Route("/memories/{id}/forget", handler(forget), methods=["POST"]),
        Route("/recall", handler(partial(recall, query=recall_query)), name="recall"),
        Route("/stats", handler(stats), name="stats"),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOOPBACK_HOSTS),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={404: not_found, 405: not_found},
        lifespan=lifespan,
    )
    app.state.get_engine = get_engine
    app.state.recalls = recalls
    app.state.csrf = Csrf(csrf_secret)
    app.state.templates = _templates()
    return app
