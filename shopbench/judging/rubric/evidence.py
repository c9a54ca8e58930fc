"""Evidence for the rubric: what the agent did (tool log) and what its words prove it read.

Facts come only from the environment. A tool message counts as an observation only when its
sha256 equals the ``result_digest`` of a tool-log entry (matched in log order), so a forged
or edited tool message, or a call that never ran, shows the agent nothing. The call's name
and arguments are taken from that log entry, never from the agent's message.

The agent's words (reasoning and content of each assistant turn) are claims. Read in
episode order, each turn's text is checked against what the agent had been shown *before*
that turn — its own turn's results come after it wrote (:mod:`claims`, :mod:`knowledge`).
Each call is checked against its turn's text (does the reasoning drive the call) and each
search against what the agent could know (:mod:`grounding`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shopbench.chat import read_arguments
from shopbench.judging.record import MAX_JUDGED_TEXT_BYTES, JudgedRecord, read_record, turn_text
from shopbench.judging.rubric.claims import TextReader
from shopbench.judging.rubric.decisions import decide
from shopbench.judging.rubric.facts import CallFacts, Evidence, EvidenceRules, Shown, TurnFacts
from shopbench.judging.rubric.grounding import content_words, ground_search, knows
from shopbench.judging.rubric.knowledge import Knowledge, observe, title_words
from shopbench.records.binding import bind_tool_messages
from shopbench.records.tools import Tool
from shopbench.records.trajectory import ToolLogEntry, Trajectory

__all__ = ["CallFacts", "Evidence", "EvidenceRules", "Shown", "TurnFacts", "extract"]

_FILTERS = ("price", "service", "sort", "shop_id")


def _split_ids(value: Any) -> list[str]:
    return [t.strip() for t in str(value or "").split(",") if t.strip()]


def _args(entry_args: dict[str, Any] | str) -> dict[str, Any]:
    return read_arguments(entry_args)[0] or {}


def _on_target(q: str, hits: list[str], know: Knowledge) -> bool:
    """Whether the best hit's title covers at least half of the search's content words."""
    wanted = set(content_words(q))
    if not wanted or not hits:
        return False
    need = (len(wanted) + 1) // 2
    for token in hits:
        in_title = set(title_words(know.products[token].title))
        if sum(knows(in_title, w) for w in wanted) >= need:
            return True
    return False


def _match_call(
    call: CallFacts, turn: TurnFacts, text_words: set[str], claims: frozenset[str]
) -> bool | None:
    """Whether the turn's text drives `call`; None when the text neither names nor
    contradicts what the call is about.

    A turn without words drives nothing. A search matches when the text names its words
    (two of them, or all if fewer), and mismatches when the text claims filtering (a word
    of `claims`) while no call of the turn filters. A recommendation matches only when the
    text names a product it recommends. A view matches when the text names a product it
    opens, and mismatches when the text names only other products.
    """
    if not turn.has_text:
        return False if call.name != Tool.TERMINATE else None
    if call.name in (Tool.FIND_PRODUCT, Tool.WEB_SEARCH):
        wanted = set(content_words(str(call.arguments.get("q", ""))))
        if wanted and sum(knows(text_words, w) for w in wanted) >= min(2, len(wanted)):
            return True
        if claims & text_words and not any(
            c.arguments.get(k) for c in turn.calls for k in _FILTERS
        ):
            return False
        return None
    if call.name in (Tool.VIEW_PRODUCT_INFORMATION, Tool.RECOMMEND_PRODUCT):
        ids = _split_ids(call.arguments.get("product_ids"))
        if not ids:
            return None
        named = turn.mentioned | turn.ids_fabricated
        named = named.union(*turn.ambiguous)
        if any(t in named for t in ids):
            return True
        if call.name == Tool.VIEW_PRODUCT_INFORMATION and not named:
            return None  # "opening the closest four" names nothing and contradicts nothing
        return False
    return None


def _bind(record: JudgedRecord) -> tuple[dict[int, ToolLogEntry], int]:
    """Tool messages (by message index) bound to the tool-log entry that backs them
    (:func:`shopbench.records.binding.bind_tool_messages`); and how many log entries no
    message matched."""
    bound = bind_tool_messages(record.messages, record.tool_log)
    return {mi: record.tool_log[li] for mi, li in bound.items()}, len(record.tool_log) - len(bound)


def extract(
    trajectory: Trajectory | Mapping[str, Any], rules: EvidenceRules | None = None
) -> Evidence:
    """The evidence in one trajectory; never raises for a record of any shape."""
    rules = rules or EvidenceRules()
    record = read_record(trajectory)
    notes = list(record.notes)
    bound, unmatched_log = _bind(record)
    answers: dict[str, int] = {}
    for mi, m in enumerate(record.messages):
        if m.role == "tool" and m.tool_call_id and m.tool_call_id not in answers:
            answers[m.tool_call_id] = mi

    know = Knowledge(rules)
    reader = TextReader(record.query, rules)
    sources = (reader.query_words, know)
    secret = frozenset(
        w for text in record.secrets for w in content_words(text)
        if w not in rules.grounding.common
        and not knows(reader.query_words, w)
    )
    turns: list[TurnFacts] = []
    recommended: list[str] = []
    recommend_turn: int | None = None
    cut_turns: list[int] = []
    not_run = 0
    for m in record.messages:
        if m.role != "assistant":
            continue
        index = len(turns)
        text, cut = turn_text(m)
        if cut:
            cut_turns.append(index)
        turn = TurnFacts(index=index, text=text)
        text_words = set(reader.read(turn, know))
        observed: list[tuple[CallFacts, str]] = []
        for tc in m.tool_calls or []:
            mi = answers.get(tc.id)
            entry = bound.get(mi) if mi is not None else None
            if entry is None:
                not_run += 1
                turn.calls.append(
                    CallFacts(turn=index, name=tc.function.name, arguments={}, executed=False)
                )
                continue
            call = CallFacts(
                turn=index, name=entry.name, arguments=_args(entry.arguments), executed=True,
                error=entry.error,
            )
            if call.name == Tool.FIND_PRODUCT:
                call.grounding = ground_search(
                    call.arguments, sources, reader.knows_number(know), rules.grounding,
                    secret=secret,
                )
            if call.name == Tool.RECOMMEND_PRODUCT and recommend_turn is None:
                recommend_turn = index
            turn.calls.append(call)
            observed.append((call, record.messages[mi].content or ""))  # type: ignore[index]
        for call in turn.calls:
            call.matches_text = (
                _match_call(call, turn, text_words, rules.filter_claims) if call.executed else None
            )
        # The turn's results arrive after its text and calls: only now does the agent know them.
        for call, content in observed:
            observe(call, content, know, index)
            if call.name == Tool.FIND_PRODUCT and call.error is None:
                call.on_target = _on_target(str(call.arguments.get("q", "")), call.shown, know)
            if call.name == Tool.RECOMMEND_PRODUCT and call.error is None and not recommended:
                recommended = _split_ids(call.arguments.get("product_ids"))
        turns.append(turn)

    if not turns:
        notes.append("no assistant messages")
    if cut_turns:
        notes.append(
            f"reasoning or content of turn(s) {', '.join(str(i + 1) for i in cut_turns[:5])} "
            f"cut to {MAX_JUDGED_TEXT_BYTES} bytes for judging"
        )
    if not_run:
        notes.append(f"{not_run} tool call(s) never executed (no tool-log entry with their result)")
    tool_messages = sum(1 for m in record.messages if m.role == "tool")
    if tool_messages > len(bound):
        notes.append(
            f"{tool_messages - len(bound)} tool message(s) match no tool-log entry and were ignored"
        )
    if unmatched_log:
        notes.append(f"{unmatched_log} tool-log entr(y/ies) have no matching tool message")
    return Evidence(
        query=record.query,
        task_id=record.task_id,
        agent=record.agent,
        miner=record.miner,
        turns=turns,
        shown=know.products,
        recommended=recommended,
        recommend_turn=recommend_turn,
        notes=notes,
        decisions=decide(record, know.products, turns, recommended, recommend_turn, rules),
        dialogue=record.outcome.dialogue if record.outcome is not None else None,
    )
