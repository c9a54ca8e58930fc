"""What an agent decided in one episode, whatever it said: the one normalisation of decisions.

Two episodes of one task with the same :class:`Decisions` made the same choices, and the
one that came second added nothing. Curation's ``duplicates`` rule drops such episodes, and
the validator's weights give a group of miners whose decisions coincide task after task the
share of one (``shopbench.scoring.copies``); both read them from here, so a copy that
escapes one escapes neither and an honest policy grouped by one is grouped by both.

Everything is read from the validator's own tool log and the record's recommendation,
never from the agent's words, with product and shop tokens (episode-scoped) mapped to
catalog ids:

- ``searches``: the set of searches that ran, each identified by what it returned: the
  observation the validator logged (the tool message whose text has the log's result
  digest), its tokens mapped to catalog ids, hashed. Two searches that showed the same
  products are one search however they were asked (an added ``"sort": "default"``, other
  words for the same query); a search whose observation the record lacks falls back to the
  logged digest itself;
- ``opened``: the set of products the successful views opened — one set over the whole
  episode, so a repeated view of a product already opened changes nothing;
- ``picks``: the recommended catalog ids, in order;
- ``errors``: the set of calls the environment refused and of searches that found nothing,
  normalised by their arguments (keys sorted, text case- and space-folded).

Two decision sets *match* (:func:`same_decisions`) when they pick the same and one's
searches, opened products and refused calls all contain the other's
(:meth:`Decisions.parts`), unless what the larger one adds holds an *exploration*: a search
of its own whose shown products it opened (``explored``), or a search that was refused or
found nothing and was followed by a search that found something (``recovered``). A search
that showed nothing new, a look at one more product the agent did not pick, or a refused
call of another tool is no decision of its own; a search the agent ran and then read into,
or a failed search it recovered from, is (the trial-and-error shopper's loose first try).
The price of that exception: a copy that adds one failed search before its first real one
is not grouped by this rule alone (docs/validator.md, "One decision stream, one share").

:data:`DECISIONS_VERSION` names this normalisation; whoever keeps decisions across releases
(the validator's copy book) starts afresh when it changes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from shopbench.chat import read_arguments
from shopbench.records.binding import bind_tool_messages, result_digest
from shopbench.records.tools import SEARCHES, Tool
from shopbench.records.trajectory import Trajectory

VIEW = Tool.VIEW_PRODUCT_INFORMATION
_TOKEN = re.compile(r"\b\d{6,}\b")
_NOTHING = result_digest("[]")  # the observation of a search that found nothing

DECISIONS_VERSION = 2
"""The normalisation's version: 1 identified a search by its arguments and compared opened
products and refused calls as equal sets; 2 identifies a search by what it returned and
compares every part by containment, an added exploration (a search read into, a failed
search recovered from) excepted."""


@dataclass(frozen=True, slots=True)
class Decisions:
    """One episode's decisions (see the module docstring)."""

    searches: frozenset[str]
    opened: frozenset[str]
    picks: tuple[str, ...]
    errors: frozenset[str]
    explored: frozenset[str] = frozenset()  # the searches some of whose products were opened
    recovered: frozenset[str] = frozenset()  # the failed searches a later search recovered

    def core(self) -> str:
        """sha256 of the picks, which must be equal for a match: callers group by it before
        comparing the :meth:`parts`."""
        text = "picks=" + ",".join(self.picks)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def parts(self) -> frozenset[str]:
        """The searches, opened products and refused calls as one set of tagged lines: one
        episode's parts contain another's exactly when each of the three contains the
        other's."""
        return frozenset(
            [*(search_part(s) for s in self.searches), *(f"opened|{p}" for p in self.opened),
             *(f"error|{e}" for e in self.errors)]
        )  # fmt: skip

    def explored_parts(self) -> frozenset[str]:
        """The :meth:`parts` lines of the explorations: the explored searches and the
        recovered failed searches."""
        return frozenset(
            [*(search_part(s) for s in self.explored), *(f"error|{e}" for e in self.recovered)]
        )


def search_part(search: str) -> str:
    """A search's line among :meth:`Decisions.parts`."""
    return f"search|{search}"


def contains(big: frozenset[str], small: frozenset[str], big_explored: frozenset[str]) -> bool:
    """Whether parts `big` hold parts `small` and add no exploration (`big_explored`: the
    explored searches' lines of `big`): the one containment rule, over lines or digests."""
    return small <= big and not ((big - small) & big_explored)


def same_decisions(a: Decisions, b: Decisions) -> bool:
    """Whether `a` and `b` are the same decisions: the same picks, and one's searches,
    opened products and refused calls contained in the other's with no exploration added."""
    if a.picks != b.picks:
        return False
    pa, pb = a.parts(), b.parts()
    return contains(pb, pa, b.explored_parts()) or contains(pa, pb, a.explored_parts())


def episode_decisions(t: Trajectory) -> Decisions:
    """The decisions of `t`, from its tool log, the observations the log vouches for and
    its recommendation (never raises)."""
    tm = t.token_map
    bound = bind_tool_messages(t.messages, t.tool_log)
    observed = {entry: message for message, entry in bound.items()}
    shown: dict[str, set[str]] = {}  # search → the catalog ids its observation named
    opened: set[str] = set()
    errors: set[str] = set()
    failed_searches: set[str] = set()  # since the last search that found something
    recovered: set[str] = set()
    for i, entry in enumerate(t.tool_log):
        if entry.error is not None:
            call = normalise_call(entry.name, entry.arguments, tm)
            errors.add(call)
            if entry.name in SEARCHES:
                failed_searches.add(call)
        elif entry.name in SEARCHES:
            if entry.result_digest == _NOTHING:
                call = "found nothing:" + normalise_call(entry.name, entry.arguments, tm)
                errors.add(call)
                failed_searches.add(call)
                continue
            recovered |= failed_searches
            failed_searches = set()
            m = observed.get(i)
            text = None if m is None else t.messages[m].content
            identity, ids = _result(entry.result_digest, text, tm)
            shown.setdefault(f"{entry.name}:{identity}", set()).update(ids)
        elif entry.name == VIEW:
            args = entry.arguments if isinstance(entry.arguments, dict) else None
            opened.update(tm.get(p, p) for p in product_ids((args or {}).get("product_ids")))
    explored = frozenset(s for s, ids in shown.items() if ids & opened)
    picks = tuple(p or "" for p in t.recommended_ids)
    return Decisions(
        frozenset(shown),
        frozenset(opened),
        picks,
        frozenset(errors),
        explored,
        frozenset(recovered),
    )


def _result(logged: str, text: str | None, token_map: Mapping[str, str]) -> tuple[str, set[str]]:
    """A search's identity — the digest of the observation the log vouches for, its episode
    tokens mapped to catalog ids (the logged digest itself without one) — and the catalog
    ids it names."""
    if text is None:
        return logged, set()
    ids: set[str] = set()

    def catalog_id(m: re.Match[str]) -> str:
        found = token_map.get(m.group(0), m.group(0))
        ids.add(found)
        return found

    mapped = _TOKEN.sub(catalog_id, text)
    return (result_digest(mapped) if token_map else logged), ids


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
