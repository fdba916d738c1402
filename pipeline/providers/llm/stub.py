"""A local stand-in for an LLM API, on loopback: OpenAI's ``/v1/chat/completions`` and Anthropic's
``/v1/messages``, so the real SDK code paths (request building, response parsing, retries) run
without a key or a bill. ``memlane bench llm`` measures the LLM stages' overhead against it, and the
tests drive it to answer well, answer garbage, fail with 500 or hang.

Its answers follow the memlane prompt that asks (recognised by the prompt's first sentence): a
plausible intent record, two query variants, a hypothetical memory, every rerank candidate in
order. They are mechanical, not smart: enough to exercise every stage, not to judge quality.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_STAGE = re.compile(r"You are the ([a-z-]+) step of memlane")
_STAGE_NAMES = {
    "intent-analysis": "intent",
    "query-synthesis": "synthesis",
    "hypothetical-memory": "hyde",
    "rerank": "rerank",
    "category-matching": "category_match",
    "summarising": "category_summary",
    "entity-extraction": "extract",
    "topic-naming": "topics",
    "supersession": "supersede",
}
_STOP = {"the", "a", "an", "of", "to", "in", "on", "is", "was", "did", "do", "does", "what", "when", "who", "how",
         "why", "which", "where", "and", "or", "for", "with", "about", "my", "our", "i", "we", "you", "it"}  # fmt: skip


def stage_of(system: str) -> str | None:
    """Which memlane prompt a system message comes from."""
    m = _STAGE.search(system)
    return _STAGE_NAMES.get(m.group(1)) if m else None


def _question(user: str) -> str:
    m = re.search(r"<question>\s*(.*?)\s*</question>", user, re.S)
    return m.group(1) if m else user


def canned_reply(stage: str | None, user: str) -> str:
    """A well-formed answer for the stage that asked."""
    q = _question(user)
    words = [w for w in re.findall(r"[\w'-]+", q) if w.lower() not in _STOP]
    if stage == "intent":
        entities = [w for w in words if w[:1].isupper()]
        return json.dumps(
            {
                "primary_intent": "factual",
                "complexity": "moderate",
                "domains": ["general"],
                "entities": entities,
                "time_expressions": [],
                "requires_reasoning": False,
            }
        )
    if stage == "synthesis":
        return "\n".join([" ".join(words), "notes about " + " ".join(words[:4])])
    if stage == "hyde":
        return f"The user mentioned {' '.join(words) or 'it'} earlier. They wrote it down as a note."
    if stage == "category_summary":
        m = re.search(r"<category>\s*(.*?)\s*</category>", user, re.S)
        return f"Memories about {m.group(1) if m else 'this category'}."
    if stage == "rerank":
        n = len(re.findall(r'<memory index="\d+"', user))
        return json.dumps(list(range(1, n + 1)))
    if stage == "category_match":
        return "{}"
    if stage == "extract":
        return json.dumps({"entities": [], "caused_by": [], "causes": []})
    if stage == "topics":  # no opinion: every memory keeps its offline topics and fact type
        n = len(re.findall(r'<memory n="\d+"', user))
        return json.dumps({"memories": [{"n": i, "topics": []} for i in range(1, n + 1)]})
    if stage == "supersede":  # no opinion: nothing is replaced
        n = len(re.findall(r'<memory n="\d+"', user.split("<stored_memories>")[-1]))
        return json.dumps({"candidates": [{"n": i, "relation": "unrelated"} for i in range(1, n + 1)]})
    return "ok"


@dataclass
class StubLLM:
    """The server's behaviour, changeable while it runs: ``mode`` is "good", "garbage", "error"
    (HTTP 500) or "hang"; ``delay_ms`` is added to every answer."""

    mode: str = "good"
    delay_ms: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)  # path, headers (lower-cased), body
    port: int = 0
    _server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> StubLLM:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # no access log on stderr
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                if stub.delay_ms:
                    time.sleep(stub.delay_ms / 1000)
                if stub.mode == "hang":
                    time.sleep(120)
                    return
                if stub.mode == "error":
                    self._send(500, {"error": {"message": "stub failure", "type": "server_error"}})
                    return
                if self.path.endswith("/chat/completions"):
                    messages = body.get("messages", [])
                    system = next((m["content"] for m in messages if m["role"] == "system"), "")
                    user = next((m["content"] for m in messages if m["role"] == "user"), "")
                    text = self._text(system, user)
                    self._send(200, _openai_response(body.get("model", "stub"), text, system + user))
                elif self.path.endswith("/messages"):
                    system = body.get("system") or ""
                    user = body["messages"][-1]["content"]
                    user = user if isinstance(user, str) else "".join(b.get("text", "") for b in user)
                    text = self._text(system, user)
                    self._send(200, _anthropic_response(body.get("model", "stub"), text, system + user))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _text(self, system: str, user: str) -> str:
                if stub.mode == "garbage":
                    return "I'm sorry, I can't help with that. {not json"
                return canned_reply(stage_of(system), user)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="llm-stub", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _openai_response(model: str, text: str, prompt: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": _tokens(prompt),
            "completion_tokens": _tokens(text),
            "total_tokens": _tokens(prompt) + _tokens(text),
        },
    }


def _anthropic_response(model: str, text: str, prompt: str) -> dict[str, Any]:
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": _tokens(prompt), "output_tokens": _tokens(text)},
    }


def main() -> None:  # pragma: no cover - a manual aid: python -m memlane.pipeline.providers.llm.stub [port]
    import sys

    stub = StubLLM(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0).start()
    print(f"LLM stub on {stub.base_url} (OpenAI) and {stub.anthropic_base_url} (Anthropic)", flush=True)
    threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover
    main()
