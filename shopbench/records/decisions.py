"""What an agent decided in one episode, whatever it said: the one normalisation of decisions.

Two episodes of one task with the same :class:`Decisions` made the same choices, and the
one that came second added nothing. Curation's ``duplicates`` rule drops such episodes, and
the validator's weights give a group of miners whose decisions coincide task after task the
share of one (``shopbench.scoring.copies``); both read them from here, so a copy that
escapes one escapes neither and an honest policy grouped by one is grouped by both.

Everything is read from the validator's own tool log and the record's recommendation,
never from the agent's words, with product and shop tokens (episode-scoped) mapped to
catalog ids:

- ``searches``: the set of searches that ran, each as its normalised arguments (keys sorted,
  text case- and space-folded);
- ``opened``: the set of products the successful views opened — one set over the whole
  episode, so a repeated view of a product already opened changes nothing;
- ``picks``: the recommended catalog ids, in order;
- ``errors``: the set of calls the environment refused and of searches that found nothing,
  normalised as searches are (a miss the agent recovered from is a decision a copy does not
  have: the trial-and-error shopper's first, failed try).

Two decision sets *match* (:func:`same_decisions`) when they open the same products, pick
the same, refuse the same calls, and the searches of one contain the other's: an extra
search that opened nothing new and changed no pick is not a decision.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from shopbench.chat import read_arguments
from shopbench.records.binding import result_digest
from shopbench.records.trajectory import Trajectory

SEARCHES = frozenset({"find_product", "web_search"})
VIEW = "view_product_information"
_TOKEN = re.compile(r"\b\d{6,}\b")
_NOTHING = result_digest("[]")  # the observation of a search that found nothing


@dataclass(frozen=True, slots=True)
class Decisions:
    """One episode's decisions (see the module docstring)."""

    searches: frozenset[str]
    opened: frozenset[str]
    picks: tuple[str, ...]
    errors: frozenset[str]

    def core(self) -> str:
        """sha256 of everything but the searches: equal cores are necessary for a match, so
        callers group by it before comparing searches."""
        text = "\x1e".join([
            "opened=" + ",".join(sorted(self.opened)), "picks=" + ",".join(self.picks),
            "errors=" + "\x1f".join(sorted(self.errors)),
        ])  # fmt: skip
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def same_decisions(a: Decisions, b: Decisions) -> bool:
    """Whether `a` and `b` are the same decisions: the same products opened, the same picks,
    the same refused calls, and one's searches a subset of the other's."""
    return (
        a.opened == b.opened
        and a.picks == b.picks
        and a.errors == b.errors
        and (a.searches <= b.searches or b.searches <= a.searches)
    )


def episode_decisions(t: Trajectory) -> Decisions:
    """The decisions of `t`, from its tool log and recommendation (never raises)."""
    tm = t.token_map
    searches: set[str] = set()
    opened: set[str] = set()
    errors: set[str] = set()
    for entry in t.tool_log:
        if entry.error is not None:
            errors.add(normalise_call(entry.name, entry.arguments, tm))
        elif entry.name in SEARCHES:
            normalised = normalise_call(entry.name, entry.arguments, tm)
            if entry.result_digest == _NOTHING:
                errors.add("found nothing:" + normalised)
            else:
                searches.add(normalised)
        elif entry.name == VIEW:
            args = entry.arguments if isinstance(entry.arguments, dict) else None
            opened.update(tm.get(p, p) for p in product_ids((args or {}).get("product_ids")))
    picks = tuple(p or "" for p in t.recommended_ids)
    return Decisions(frozenset(searches), frozenset(opened), picks, frozenset(errors))


def normalise_call(name: str, arguments: dict[str, Any] | str, token_map: Mapping[str, str]) -> str:
    """`name` and its arguments as one comparable line: keys sorted, tokens mapped to
    catalog ids, text case- and space-folded; unreadable arguments as their folded text."""
    # A logged object was read by the environment already; text is read by the one reader.
    args = arguments if isinstance(arguments, dict) else read_arguments(arguments)[0]
    text: str | None = None
    if args is not None:
        try:
            text = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
        except (orjson.JSONEncodeError, TypeError):  # beyond 64-bit integers, NaN, depth
            text = None
    if text is None:
        text = arguments if isinstance(arguments, str) else repr(arguments)
    if token_map:
        text = _TOKEN.sub(lambda m: token_map.get(m.group(0), m.group(0)), text)
    return f"{name}:{' '.join(text.casefold().split())}"


def product_ids(value: object) -> list[str]:
    """The ids a ``product_ids`` argument names: comma-separated text or a list."""
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [p.strip() for p in str(value or "").split(",") if p.strip()]
