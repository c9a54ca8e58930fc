"""The judge's prompt: the versioned template filled with the rubric and one trajectory.

The template (``shopbench/judging/llm/prompts/llm_judge_<version>.txt``) holds every word of
instruction, in a ``=== system ===`` and a ``=== user ===`` section with ``$name``
placeholders. Only the template is ever parsed for placeholders; the trajectory's text is
inserted as it is (after :func:`~shopbench.judging.llm.view.defang`), inside blocks whose
tag carries a nonce derived from the trajectory's own hash, so no text inside a block can
close it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

from shopbench.judging.errors import JudgeSpecError
from shopbench.judging.llm.release import JudgeRelease
from shopbench.judging.llm.truncate import fit
from shopbench.judging.llm.view import Block, View
from shopbench.judging.rubric.judge import Rubric

_SYSTEM = "=== system ==="
_USER = "=== user ==="


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A prompt file split into its two sections."""

    version: str
    system: Template
    user: Template


@cache
def load_template(version: str) -> PromptTemplate:
    """The packaged prompt of `version`; JudgeSpecError naming the file when it is missing
    or lacks a section."""
    name = f"llm_judge_{version}.txt"
    where = f"shopbench/judging/llm/prompts/{name}"
    try:
        text = resources.files("shopbench.judging.llm").joinpath("prompts", name).read_text("utf-8")
    except (FileNotFoundError, OSError):
        raise JudgeSpecError(f"{where}: no such prompt (prompt version {version!r})") from None
    if not text.startswith(_SYSTEM) or _USER not in text:
        raise JudgeSpecError(f"{where}: expected a '{_SYSTEM}' and a '{_USER}' section")
    system, user = text[len(_SYSTEM) :].split(_USER, 1)
    return PromptTemplate(version, Template(system.strip("\n")), Template(user.strip("\n")))


def criteria_text(rubric: Rubric) -> str:
    """The rubric's criteria as the prompt lists them: number, name, kind, description."""
    lines = []
    for i, c in enumerate(rubric.criteria, start=1):
        kind = f"gate, fails to {c.fail_score:g}" if c.kind == "gate" else f"bonus +{c.weight:g}"
        lines.append(f"{i}. {c.name} ({kind}): {c.description}")
    return "\n".join(lines)


def params_text(rubric: Rubric) -> str:
    """The rubric's thresholds, which the descriptions name."""
    return "; ".join(f"{k} = {v}" for k, v in rubric.params.model_dump().items())


@dataclass(frozen=True, slots=True)
class Prompt:
    """The two chat messages sent, and what the judge noted while making them."""

    system: str
    user: str
    notes: tuple[str, ...]
    content_hash: str

    def messages(self) -> list[dict[str, str]]:
        """The chat messages of the request."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


class Renderer:
    """Renders trajectories for one release and rubric (the system message is fixed)."""

    def __init__(self, release: JudgeRelease, rubric: Rubric) -> None:
        self.release = release
        self.template = load_template(release.prompt_version)
        self._system_by_nonce: dict[str, str] = {}
        self._criteria = criteria_text(rubric)
        self._params = params_text(rubric)

    def system(self, nonce: str) -> str:
        """The system message for a trajectory whose blocks use `nonce`."""
        return self.template.system.substitute(
            criteria=self._criteria, params=self._params,
            agent_tag=f"agent-{nonce}", unlogged_tag=f"unlogged-{nonce}",
        )

    def user(self, view: View, cut_notes: list[str], facts: str = "") -> str:
        """The user message: the task, the validator's facts, the tool log and the framed
        transcript (a prompt version without a facts section leaves `facts` out)."""
        # The call (name and arguments) is the agent's choice, so it sits inside its tags;
        # the number, turn and outcome are the validator's.
        tag = f"agent-{view.nonce}"
        log = "\n".join(
            f"#{e.number} turn {e.turn}: <{tag}>{e.name} {e.arguments}</{tag}> -> {e.outcome}"
            for e in view.log
        ) or "(no call ran)"
        transcript = "\n".join(_block(b, view.nonce) for b in view.blocks) or "(no messages)"
        notes = (
            "Cut for length by the validator: " + "; ".join(cut_notes) + "." if cut_notes else ""
        )
        return self.template.user.substitute(
            intent=view.intent, query=view.query, tool_log=log, cut_notes=notes,
            transcript=transcript, facts=facts or "(none)",
        )

    def tokens(self, system: str, user: str) -> int:
        """The estimated tokens of a prompt (UTF-8 bytes over the release's bytes/token)."""
        size = len(system.encode("utf-8")) + len(user.encode("utf-8"))
        return math.ceil(size / self.release.bytes_per_token)

    def render(self, view: View, notes: list[str] | None = None, facts: str = "") -> Prompt:
        """The prompt for `view` with the validator's `facts`, cut to the release's budget
        (see truncate.fit; the facts are never cut); raises JudgeUnavailable("too_long") when
        it cannot fit."""
        system = self.system(view.nonce)

        def measure(v: View) -> int:
            # room for the cut notes
            return self.tokens(system, self.user(v, ["x" * 400], facts))

        cut = fit(view, self.release.prompt_budget_tokens, measure, self.release.bytes_per_token)
        return Prompt(system, self.user(view, cut, facts), tuple([*(notes or []), *cut]),
                      view.content_hash)


def _block(b: Block, nonce: str) -> str:
    if b.kind == "agent":
        body = "\n".join(f"[{p.label}]\n{p.shown()}" for p in b.parts) or "(no text)"
        requested = "\n".join(f"- {name} {args}" for name, args, _ in b.calls)
        if requested:
            body += "\n[calls requested]\n" + requested
        ran = [f"#{n}" for _, _, n in b.calls if n is not None]
        idle = sum(n is None for _, _, n in b.calls)
        outcome = f"Ran: {', '.join(ran)}." if ran else "No call of this turn ran."
        if idle and ran:
            outcome += f" {idle} requested call(s) did not run."
        return f'<agent-{nonce} turn="{b.turn}">\n{body}\n</agent-{nonce}>\n{outcome}'
    text = b.parts[0].shown() if b.parts else ""
    if b.kind == "observation":
        return f'<observation call="#{b.log_number}">\n{text}\n</observation>'
    if b.kind == "unlogged":
        return (
            f"<unlogged-{nonce}>\n{text}\n</unlogged-{nonce}>\n"
            "(This tool message matches no tool-log entry: it is not an observation.)"
        )
    return f"[episode loop to the agent] {text}"
