"""An in-process OpenAI-compatible judge server, speaking the chat API the way vLLM does.

FastAPI + uvicorn on a thread, on a free loopback port. ``GET /v1/models`` lists what
:attr:`FakeJudgeServer.models` says (vLLM's fields: ``id``, ``root``, ``max_model_len``);
``POST /v1/chat/completions`` answers like a small judge model that reads the prompt: it
learns the criteria and the untrusted-block nonce from the system message, and passes every
criterion except those listed in :attr:`FakeJudgeServer.fails` for the model asked.

It is deliberately gullible: an instruction to pass everything that appears *outside* the
agent's delimited blocks fools it (so a test can tell whether the framing holds), while the
same text inside a block is treated as the agent's words, which fail
``no_judge_directed_text``. It fails ``compared_candidates`` when the agent's turns name
fewer than two product ids, and the ``recovered`` bonus when fewer than two searches ran.

Per model name, :meth:`FakeJudgeServer.plan` queues misbehaviours consumed one request at a
time: ``429`` (with ``Retry-After: 3``), ``429_date`` (``Retry-After`` an HTTP date
:attr:`FakeJudgeServer.retry_date_s` ahead), ``503``, ``503_retry`` (with ``Retry-After: 2``),
``slow``, ``non_json``, ``no_choices``,
``truncated`` (cut JSON, ``finish_reason: length``), ``garbage`` (prose, no JSON), ``prose``
(JSON wrapped in ``<think>`` and a code fence), ``reject_format`` (400 when
``response_format`` is present, as a server without structured output answers), ``context``
(400: the prompt is over the server's context length).

Other clients of an OpenAI-compatible server use it too: :attr:`FakeJudgeServer.says` gives a
model a fixed reply text instead of a judgement (a paraphraser's rewrite, a policy's turn),
and :attr:`FakeJudgeServer.tokens` records the bearer token of every request.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from typing import Any

import fastapi
import uvicorn
from fastapi.responses import JSONResponse, Response

_NONCE = re.compile(r"between <agent-([0-9a-f]+) \.\.\.>")
_CRITERION = re.compile(r"^\d+\. ([a-z_]+) \((?:gate|bonus)", re.MULTILINE)
_ID = re.compile(r"\b\d{10}\b")
_FOOLED_BY = ("all criteria pass", "score it 1.0")
_ADDRESSED = ("ignore the rubric", "score it", "all criteria pass", "judge")


def strip_blocks(text: str, nonce: str) -> tuple[str, list[str]]:
    """The prompt outside the agent's and unlogged blocks, and the blocks' insides."""
    block = re.compile(
        rf"<(agent|unlogged)-{nonce}[^>]*>(.*?)</\1-{nonce}>", re.DOTALL
    )
    inside = [m.group(2) for m in block.finditer(text)]
    return block.sub("", text), inside


def judge_reply(body: dict[str, Any], fails: set[str]) -> dict[str, Any]:
    """What the fake judge model answers to a request body (see the module docstring)."""
    system = body["messages"][0]["content"]
    user = body["messages"][1]["content"]
    names = _CRITERION.findall(system)
    nonce_match = _NONCE.search(system)
    nonce = nonce_match.group(1) if nonce_match else "none"
    outside, inside = strip_blocks(user, nonce)
    fooled = any(phrase in outside.lower() for phrase in _FOOLED_BY)
    addressed = any(p in text.lower() for text in inside for p in _ADDRESSED)
    # A reader's check: a comparison names at least two products in the agent's own words.
    turns = re.findall(rf'<agent-{nonce} turn="\d+">(.*?)</agent-{nonce}>', user, re.DOTALL)
    said = " ".join(t.split("[calls requested]")[0] for t in turns)
    compared = len(set(_ID.findall(said))) >= 2
    searches = len(re.findall(rf"#\d+ turn \d+: <agent-{nonce}>find_product ", user))
    criteria = {}
    for name in names:
        failed = not fooled and (
            name in fails
            or (name == "no_judge_directed_text" and addressed)
            or (name == "compared_candidates" and not compared)
            or (name == "recovered" and searches < 2)
        )
        criteria[name] = {
            "reason": f"Judged {name} from the tool log and the turns.",
            "verdict": "fail" if failed else "pass",
        }
    return {"criteria": criteria, "summary": "fooled" if fooled else "judged on the record"}


def completion(content: str, model: str, finish: str = "stop") -> dict[str, Any]:
    """A chat-completion body as vLLM sends it."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content,
                                             "reasoning_content": None, "tool_calls": []},
                     "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class FakeJudgeServer:
    """The server's state; tests set :attr:`models`, :attr:`fails` and plans, and read
    :attr:`requests`."""

    def __init__(self) -> None:
        self.models: list[dict[str, Any]] = []
        self.models_status = 200
        self.fails: dict[str, set[str]] = {}
        self.plans: dict[str, deque[str]] = {}
        self.requests: list[dict[str, Any]] = []
        self.model_list_requests = 0
        self.slow_s = 2.0
        self.retry_date_s = 4.0
        self.says: dict[str, str] = {}
        self.tokens: list[str | None] = []
        self.url = ""
        self.app = self._app()

    def reset(self, *served: str, max_model_len: int = 40960) -> None:
        """Forget everything; serve `served` model ids (root = the id)."""
        self.models = [
            {"id": m, "object": "model", "created": 0, "owned_by": "vllm", "root": m,
             "parent": None, "max_model_len": max_model_len}
            for m in served
        ]
        self.models_status = 200
        self.fails, self.plans, self.requests = {}, {}, []
        self.model_list_requests = 0
        self.says, self.tokens = {}, []

    def plan(self, model: str, *behaviours: str) -> None:
        """Queue misbehaviours for requests naming `model`, one per request."""
        self.plans.setdefault(model, deque()).extend(behaviours)

    def chats(self, model: str | None = None) -> list[dict[str, Any]]:
        """The chat request bodies received (for `model`, when given)."""
        return [b for b in self.requests if model is None or b.get("model") == model]

    def _app(self) -> fastapi.FastAPI:
        app = fastapi.FastAPI()

        @app.get("/v1/models")
        async def models(request: fastapi.Request) -> Any:
            self.model_list_requests += 1
            self.tokens.append(_bearer(request))
            if self.models_status != 200:
                return JSONResponse({"error": "unavailable"}, status_code=self.models_status)
            return {"object": "list", "data": self.models}

        @app.post("/v1/chat/completions")
        async def chat(request: fastapi.Request) -> Any:
            body = await request.json()
            self.requests.append(body)
            self.tokens.append(_bearer(request))
            model = body.get("model", "")
            queue = self.plans.get(model)
            behaviour = queue.popleft() if queue else "judge"
            if model not in {m["id"] for m in self.models}:
                return JSONResponse(
                    {"error": {"message": f"The model `{model}` does not exist."}}, 404
                )
            if model in self.says:
                text = self.says[model]
            else:
                text = json.dumps(judge_reply(body, self.fails.get(model, set())))
            if behaviour == "429":
                return JSONResponse({"error": "rate limited"}, status_code=429,
                                    headers={"Retry-After": "3"})
            if behaviour == "429_date":
                when = formatdate(time.time() + self.retry_date_s, usegmt=True)
                return JSONResponse({"error": "rate limited"}, status_code=429,
                                    headers={"Retry-After": when})
            if behaviour == "503":
                return JSONResponse({"error": "overloaded"}, status_code=503)
            if behaviour == "503_retry":
                return JSONResponse({"error": "overloaded"}, status_code=503,
                                    headers={"Retry-After": "2"})
            if behaviour == "slow":
                await asyncio.sleep(self.slow_s)
            if behaviour == "non_json":
                return Response("<html>502 Bad Gateway</html>", media_type="text/html")
            if behaviour == "no_choices":
                return {"object": "chat.completion", "choices": []}
            if behaviour == "truncated":
                return completion(text[:40], model, finish="length")
            if behaviour == "garbage":
                return completion("The agent seems to have done a decent job overall.", model)
            if behaviour == "prose":
                return completion(f"<think>Let me look.</think>Here it is:\n```json\n{text}\n```",
                                  model)
            if behaviour == "context":
                return JSONResponse({"error": {"message": (
                    "This model's maximum context length is 40960 tokens. However, you "
                    "requested 52000 tokens.")}}, 400)
            if behaviour == "reject_format" and "response_format" in body:
                return JSONResponse(
                    {"error": {"message": "response_format json_schema is not supported"}}, 400
                )
            return completion(text, model)

        return app


def _bearer(request: fastapi.Request) -> str | None:
    """The bearer token a request carries, or None."""
    value = request.headers.get("authorization", "")
    return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None


@contextmanager
def running(server: FakeJudgeServer) -> Iterator[FakeJudgeServer]:
    """Serve `server` on a free loopback port for the duration of the block."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(server.app, log_level="error", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.started, "the fake judge server did not start"
    server.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield server
    finally:
        srv.should_exit = True
        thread.join(timeout=5)
        sock.close()


def free_port() -> int:
    """A loopback port nothing listens on (for the endpoint-down case)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


class RecordedSleeps:
    """An injected async sleep that records the waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)

