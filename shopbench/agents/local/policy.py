""":class:`HFPolicy`: an agent whose turns a local model generates (``hf:PATH``).

Every policy over one model directory shares one loaded engine (:func:`shared_engine`) and,
on each event loop, one :class:`~shopbench.agents.local.batcher.Batcher`, so the episodes an
evaluation runs at once — its K samples included — are generated together. A sampled turn's
seed is derived from the policy's seed and the prompt, so a rerun draws the same tokens
whatever the batches were.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from pathlib import Path
from typing import Any

from shopbench.agents.errors import LocalModelError
from shopbench.agents.format.parse import parse_generation
from shopbench.agents.format.views import apply_view, recorded_view, resolve_view, view_tools
from shopbench.agents.local.batcher import Batcher
from shopbench.agents.local.config import HFPolicyConfig
from shopbench.agents.local.engine import HFEngine, shared_engine
from shopbench.agents.local.grammar import GRAMMARS, reply_grammar
from shopbench.agents.local.ort_engine import ORTEngine
from shopbench.agents.local.request import GenRequest
from shopbench.chat import AssistantMessage, ChatMessage

_BATCHERS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[int, Batcher]
] = weakref.WeakKeyDictionary()


def read_example(path: Path) -> list[ChatMessage]:
    """The worked episode in the JSON file at `path` (a list of chat messages, its system
    prompt left out); LocalModelError when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        messages = [ChatMessage.model_validate(m) for m in data]
    except (OSError, ValueError, TypeError) as e:
        raise LocalModelError(f"{path}: not an example episode ({e})") from None
    if not messages or any(m.role == "system" for m in messages):
        raise LocalModelError(f"{path}: an example episode is user, assistant and tool "
                              "messages, without a system prompt")  # fmt: skip
    return messages


def turn_seed(seed: int, prompt: tuple[int, ...]) -> int:
    """The sampling seed of one turn: a function of the policy's seed and the prompt."""
    h = hashlib.sha256(f"{seed}:".encode() + b",".join(str(t).encode() for t in prompt))
    return int.from_bytes(h.digest()[:8], "big") >> 1


class HFPolicy:
    """An agent over a local model directory, played with transformers or onnxruntime-genai
    (the config's ``engine``)."""

    def __init__(
        self, config: HFPolicyConfig, *, engine: HFEngine | ORTEngine | None = None
    ) -> None:
        self.config = config
        self.name = f"hf:{config.path}"
        self.view = resolve_view(recorded_view(config.path), config.view, str(config.path))
        self.engine = engine or shared_engine(config)
        self.example = read_example(config.example) if config.example is not None else []

    def batcher(self) -> Batcher:
        """The batcher of this engine on the running event loop."""
        per_loop = _BATCHERS.setdefault(asyncio.get_running_loop(), {})
        found = per_loop.get(id(self.engine))
        if found is None or found.engine is not self.engine:
            found = per_loop[id(self.engine)] = Batcher(
                self.engine,
                max_batch=self.config.max_batch,
                wait_s=self.config.batch_wait_ms / 1000.0,
            )
        return found

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        """Generate the next turn, from the conversation in the model's observation view,
        and read it as an assistant message.

        LocalModelError when the conversation no longer fits the model's context (the loop
        records it as the policy's failure)."""
        shown = apply_view(messages, self.view, tools)
        if self.example:  # the worked episode between the system prompt and the task
            opening = 1 if shown and shown[0].role == "system" else 0
            shown = [*shown[:opening], *self.example, *shown[opening:]]
        prompt = self.engine.encode(
            shown, view_tools(tools, self.view), self.config.chat_template_kwargs
        )
        room = self.engine.max_positions - len(prompt)
        if room < 1:
            raise LocalModelError(
                f"the conversation is {len(prompt)} tokens; the model reads at most "
                f"{self.engine.max_positions}"
            )
        grammar = None
        if self.config.decoding in GRAMMARS:
            markers = self.engine.grammar_tokenizer().marker_ids
            grammar = reply_grammar(
                tools, messages, markers, grounded=GRAMMARS[self.config.decoding]
            )
        request = GenRequest(
            prompt=prompt,
            max_new_tokens=min(self.config.max_new_tokens, room),
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            seed=turn_seed(self.config.seed, prompt),
            grammar=grammar,
        )
        result = await self.batcher().generate(request)
        return parse_generation(result.text)
