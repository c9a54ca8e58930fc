"""Transport benchmark: signed validator → miner round trips on loopback.

A miner app serving an instant policy runs under uvicorn in a separate process; the
validator's :class:`MinerClient` sends it signed ``POST /step`` requests whose history is
the size of turn 15 of an episode (system prompt, query, 14 turns of reasoning, tool calls
and search results: about 40 KB), first one at a time, then with 64 in flight. Every round
trip is measured from before the request is serialised and signed to after the reply is
validated, so the figures include hashing, signing, verifying, the nonce store, the standing
check, admission and both sides' pydantic validation.
"""

from __future__ import annotations

import asyncio
import json
import random
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shopbench.bench.stats import percentile
from shopbench.chat import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.env.prompts import SYSTEM_PROMPT_VERSION, render_system_prompt
from shopbench.env.tools import ShopTools
from shopbench.records.tools import Tool

HISTORY_TURNS = 14  # completed turns before the one requested: turn 15
LIMITS = {"max_turns": 30, "max_calls_per_turn": 5}  # as the environment fills the prompt
_WORDS = (
    "steel", "water", "bottle", "insulated", "kids", "school", "lunch", "box", "ceramic",
    "mug", "coffee", "travel", "leak", "proof", "bpa", "free", "wide", "mouth", "stainless",
    "vacuum", "flask", "outdoor", "sports", "gym",
)  # fmt: skip


def _search_result(rng: random.Random) -> str:
    """A find_product observation: ten products as the environment shows them."""
    hits = [
        {
            "product_id": str(rng.randrange(10**9, 10**10)),
            "shop_id": str(rng.randrange(10**8, 10**9)),
            "title": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 10))).title(),
            "price": round(rng.uniform(50, 5000), 2),
            "service": rng.sample(["official", "freeShipping", "COD", "flashsale"], 2),
            "sold_count": rng.randrange(0, 20000),
        }
        for _ in range(10)
    ]
    return json.dumps(hits, ensure_ascii=False)


def history(seed: int = 0) -> tuple[list[ChatMessage], list[dict[str, Any]]]:
    """The messages and tools an agent sees at turn 15 of a search-heavy episode."""
    rng = random.Random(seed)
    messages = [
        ChatMessage(role="system", content=render_system_prompt(SYSTEM_PROMPT_VERSION, **LIMITS)),
        ChatMessage(role="user", content="An insulated steel bottle for school under 800 pesos"),
    ]
    for turn in range(1, HISTORY_TURNS + 1):
        query = " ".join(rng.choice(_WORDS) for _ in range(3))
        args = json.dumps({"q": query, "page": 1 + turn % 3, "price": "0-800"})
        call = ToolCall(
            id=f"call_{turn}", function=FunctionCall(name=Tool.FIND_PRODUCT, arguments=args)
        )
        thought = " ".join(rng.choice(_WORDS) for _ in range(30))
        messages.append(ChatMessage(role="assistant", reasoning_content=thought, tool_calls=[call]))
        result = _search_result(rng)
        messages.append(
            ChatMessage(role="tool", tool_call_id=call.id, name=Tool.FIND_PRODUCT, content=result)
        )
    tools = [spec.openai_schema() for spec in ShopTools.tool_specs().values()]
    return messages, tools


class InstantPolicy:
    """Answers every turn at once with one search call."""

    name = "instant"

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        search = FunctionCall(name=Tool.FIND_PRODUCT, arguments='{"q":"x"}')
        call = ToolCall(id="c", function=search)
        return AssistantMessage(reasoning_content="search again", tool_calls=[call])


def serve(miner: str, validator_hotkey: str, slots: int) -> None:
    """Serve the miner app on a free loopback port; the port is the first line of stdout."""
    import uvicorn

    from template.protocol import AgentCard
    from template.serve import bind
    from template.signing import LocalWallet
    from template.transport import CallerGate, MinerAppConfig, create_miner_app

    app = create_miner_app(
        InstantPolicy(),
        AgentCard(model="bench/instant"),
        LocalWallet.derive(miner).hotkey_ss58,
        CallerGate.allow({validator_hotkey}),
        MinerAppConfig(max_active=slots, max_waiting=slots),
    )
    sock = bind()
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="error", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def _start_miner(
    miner: str, validator_hotkey: str, slots: int
) -> tuple[subprocess.Popen[str], int]:
    """The miner process and its port (RuntimeError if it does not come up in 60 s)."""
    module = "template.bench.transport"
    args = [sys.executable, "-m", module, "serve", miner, validator_hotkey, str(slots)]
    # Run from the directory holding `template`, so the child imports it as the parent did.
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=root)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else ""
    if not line.strip().isdigit():
        proc.kill()
        raise RuntimeError("the benchmark miner did not start (see its stderr above)")
    return proc, int(line)


async def _measure(
    url: str, miner_hotkey: str, signer: Any, request: Any, concurrency: int, requests: int
) -> dict[str, Any]:
    """Round trips at `concurrency` in flight: rate, latency quantiles and failures."""
    from template.errors import TransportError
    from template.transport import ClientConfig, MinerClient, MinerEndpoint

    endpoint = MinerEndpoint(uid=0, hotkey=miner_hotkey, url=url)
    config = ClientConfig(max_concurrency=concurrency, turn_deadline_s=30)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    async with MinerClient(signer, config) as client:

        async def drive(count: int, record: bool) -> None:
            remaining = count

            async def worker() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    t0 = time.perf_counter()
                    try:
                        await client.step(endpoint, request)
                    except TransportError as e:
                        errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                        continue
                    if record:
                        latencies.append((time.perf_counter() - t0) * 1000)

            await asyncio.gather(*(worker() for _ in range(concurrency)))

        await drive(2 * concurrency, record=False)  # open the connections, warm both sides
        errors.clear()
        start = time.perf_counter()
        await drive(requests, record=True)
        wall = time.perf_counter() - start
    return {
        "rps": len(latencies) / wall if wall else 0.0,
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "errors": errors,
    }


def run(requests_c1: int = 300, requests_c64: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Measure round trips at concurrency 1 and 64 against a miner in another process."""
    from template.protocol import StepRequest, ToolSchema, WireMessage
    from template.signing import LocalWallet

    validator, miner = LocalWallet.derive("bench-validator"), "bench-miner"
    messages, tools = history(seed)
    request = StepRequest(
        episode_id="bench",
        turn=HISTORY_TURNS + 1,
        deadline_ms=30_000,
        messages=[WireMessage.from_chat(m) for m in messages],
        tools=[ToolSchema.model_validate(t) for t in tools],
    )
    history_bytes = len(request.model_dump_json(exclude_none=True).encode())
    server, port = _start_miner(miner, validator.hotkey_ss58, slots=64)
    try:
        url = f"http://127.0.0.1:{port}"
        miner_hotkey = LocalWallet.derive(miner).hotkey_ss58
        results = {
            c: asyncio.run(_measure(url, miner_hotkey, validator.hotkey, request, c, n))
            for c, n in ((1, requests_c1), (64, requests_c64))
        }
    finally:
        server.terminate()
        server.wait(10)
    out: dict[str, Any] = {"history_bytes": history_bytes}
    for c, r in results.items():
        out[f"rps_c{c}"] = round(r["rps"], 1)
        out[f"p50_ms_c{c}"] = round(r["p50_ms"], 2)
        out[f"p99_ms_c{c}"] = round(r["p99_ms"], 2)
        out[f"errors_c{c}"] = r["errors"]
    out["requests_c1"], out["requests_c64"] = requests_c1, requests_c64
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        print(json.dumps(run(), sort_keys=True))
