"""Recovery mining: trial-and-error segments that end in success.

Three kinds, each found from the calls and their results alone:

- ``search_retry``: a search that ran and showed nothing, or nothing the agent went on to
  recommend, followed by a different search that showed what it recommended;
- ``rejected_candidate``: products opened and none of them recommended, followed by a new
  search (the agent checked them against the request and looked again);
- ``tool_error``: a call the environment refused (bad arguments, a bad id), followed by a
  call of the same tool that ran.

Only episodes the grader counts a success are mined (the segment must end in success).
Each segment names the turns that went wrong, so the output can mask them out of training.
"""

from __future__ import annotations

from dataclasses import dataclass

from shopbench.curation.features import RECOMMEND, SEARCH, VIEW, EpisodeFacts

RECOVERY_TAG = "recovery"
KINDS = ("search_retry", "rejected_candidate", "tool_error")


@dataclass(frozen=True, slots=True)
class Segment:
    """One recovery: its kind and the turns that went wrong before it."""

    kind: str
    wrong_turns: tuple[int, ...]


def _recommended(facts: EpisodeFacts) -> set[str]:
    for c in facts.calls:
        if c.name == RECOMMEND and c.answered and c.error is None:
            return set(c.ids())
    return set()


def recovery_segments(facts: EpisodeFacts, success: bool) -> list[Segment]:
    """The recovery segments of a successful episode (none for a failed one)."""
    if not success:
        return []
    rec = _recommended(facts)
    ran = [c for c in facts.calls if c.answered]
    out: list[Segment] = []
    searches = [c for c in ran if c.name == SEARCH and c.error is None]
    missed = [c for c in searches if not rec.intersection(c.shown)]
    if rec:
        for i, miss in enumerate(missed):
            if any(
                later.turn > miss.turn and rec.intersection(later.shown)
                and later.arguments != miss.arguments
                for later in searches
            ):  # fmt: skip
                wrong = tuple(sorted({m.turn for m in missed[: i + 1]}))
                out.append(Segment("search_retry", wrong))
                break
    rejected = [
        c for c in ran if c.name == VIEW and c.error is None and c.ids()
        and not rec.intersection(c.ids())
    ]  # fmt: skip
    for view in rejected:
        if any(s.turn > view.turn for s in searches):
            out.append(Segment("rejected_candidate", (view.turn,)))
            break
    for i, c in enumerate(ran):
        if c.error is not None and any(
            later.name == c.name and later.error is None for later in ran[i + 1 :]
        ):
            out.append(Segment("tool_error", (c.turn,)))
            break
    return out


def recovery_tags(segments: list[Segment]) -> list[str]:
    """``recovery``, one ``recovery:<kind>`` per kind found and ``recovery:turns=<i,j>`` (the
    assistant turns, from 0, that went wrong); nothing for no segment."""
    if not segments:
        return []
    wrong = sorted({t for s in segments for t in s.wrong_turns})
    return [
        RECOVERY_TAG, *sorted({f"{RECOVERY_TAG}:{s.kind}" for s in segments}),
        f"{RECOVERY_TAG}:turns={','.join(map(str, wrong))}",
    ]  # fmt: skip


def refused_turns(facts: EpisodeFacts) -> set[int]:
    """The assistant turns (from 0) with a call the environment refused."""
    return {c.turn for c in facts.calls if c.error is not None}


def turn_mask(wrong: set[int], assistant_turns: int) -> list[bool] | None:
    """One entry per assistant turn, False on the `wrong` ones; None when none is."""
    if not wrong:
        return None
    return [i not in wrong for i in range(assistant_turns)]
