"""The paraphrasing sybil: the careful shopper's calls and picks, its reasoning reworded.

``paraphraser`` plays exactly the episode ``careful`` plays with the same seed — the same
searches, the same products opened, the same recommendation — and rewrites every sentence
of its reasoning and final message with phrases drawn per episode
(:mod:`~shopbench.agents.reference.rewording`): the request's words, titles, ids and prices
stay as they were, so the reasoning still names what each call is about. It is the miner
that copies another's decisions under its own name: a text near-duplicate filter misses it,
and its traces add nothing to a training set that holds the original's
(``shopbench/curation``'s ``duplicates`` rule finds it on what it did).
"""

from __future__ import annotations

import random
import re

from shopbench.agents.reference.careful import CarefulPolicy
from shopbench.agents.reference.rewording import Rewording
from shopbench.agents.reference.script import Context, Script, ScriptedPolicy, Step

# What a text may not change: quoted words, ids, prices and other numbers.
_KEEP = re.compile(r'"[^"]*"|₱[\d,.]+|\d[\d,.%]*')
_PHRASES: tuple[tuple[str, str], ...] = (
    (r"the customer", "{the customer|the shopper|the buyer|this person}"),
    (r"wants", "{wants|is after|is looking for|needs}"),
    (r"i'll recommend", "{i'll recommend|my recommendation is|i'm going with|i'll suggest}"),
    (r"i'll", "{i'll|i will|let me}"),
    (r"let me", "{let me|i'll|time to}"),
    (r"okay,|so,|alright,|right,", "{okay,|so,|alright,|right,|well,|}"),
    (r"first a search for", "{first a search for|i'll start by searching for|to begin, a "
     "lookup of|starting with a search for}"),
    (r"no filters needed", "{no filters needed|nothing to narrow by|plain, without extras}"),
    (r"got|there are", "{got|there are|i see|that gives}"),
    (r"results|hits", "{results|hits|listings|matches}"),
    (r"among them", "{among them|including|for instance|such as}"),
    (r"the most relevant look like", "{the most relevant look like|the closest seem to be|"
     "the best matches are}"),
    (r"i need the details to verify the requirements",
     "{i need the details to verify the requirements|the details will tell whether it all "
     "holds|only the full listings can confirm the needs}"),
    (r"opening", "{opening|viewing|pulling up}"),
    (r"checking the details:|looking at the details:",
     "{checking the details:|looking at the details:|going through the listings:|from the "
     "product pages:}"),
    (r"fits:", "{fits:|works:|qualifies:|matches:}"),
    (r"misses:", "{misses:|falls short:|fails:}"),
    (r"both fit, but|either would do;", "{both fit, but|either would do;|each works, yet}"),
    (r"i prefer the first because it is cheaper|i'll take the first because it is cheaper",
     "{i prefer the first because it is cheaper|the first wins on price|i lean to the first, "
     "as it costs less}"),
    (r"everything checks out\.", "{everything checks out.|all good.|it all holds up.|no "
     "problems found.}"),
    (r"requirements?", "{requirements|conditions|needs}"),
    (r"details", "{details|product pages|full listings}"),
    (r"recommended; wrapping up\.|that's done — ending the session\.|the recommendation went "
     r"through, so i can close the task\.",
     "{recommended; wrapping up.|that's done, ending here.|the pick is in, so i can close.|all "
     "set; closing the task.}"),
    (r"i recommend", "{i recommend|i suggest|my pick is}"),
    (r"it meets every requirement you listed", "{it meets every requirement you listed|it "
     "satisfies all your conditions|it fits everything you asked for}"),
)
_PATTERN = re.compile(
    "|".join(f"(?P<p{i}>\\b(?:{p})(?!\\w))" for i, (p, _) in enumerate(_PHRASES)),
    re.IGNORECASE,
)


def reword(text: str | None, r: Rewording) -> str | None:
    """`text` with its stock phrases swapped for equivalents drawn by `r` (quoted words,
    ids and prices untouched)."""
    if not text:
        return text
    out: list[str] = []
    at = 0
    for m in _KEEP.finditer(text):
        out.append(_swap(text[at : m.start()], r))
        out.append(m.group(0))
        at = m.end()
    out.append(_swap(text[at:], r))
    joined = re.sub(r" {2,}", " ", "".join(out)).strip()
    return re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), joined)


def _swap(part: str, r: Rewording) -> str:
    def one(m: re.Match[str]) -> str:
        i = int(next(k for k, v in m.groupdict().items() if v is not None)[1:])
        return r.say(_PHRASES[i][1])

    return _PATTERN.sub(one, part)


class ParaphraserPolicy(ScriptedPolicy):
    """The careful shopper's episode (same seed), every sentence reworded."""

    name = "paraphraser"
    honest = None  # an honest policy's decisions under another name: a copy, not a cheat
    adversary = True

    def script(self, ctx: Context) -> Script:
        """Careful's steps as careful plays them with this seed, the text reworded."""
        inner = Context(
            query=ctx.query, tools=ctx.tools, seed=ctx.seed, max_turns=ctx.max_turns,
            rng=random.Random(f"{CarefulPolicy.name}|{ctx.seed}|{ctx.query}"),
        )  # fmt: skip
        careful = CarefulPolicy(seed=ctx.seed).script(inner)
        r = Rewording(ctx.rng)
        try:
            step = next(careful)
            while True:
                results = yield Step(calls=step.calls, reasoning=reword(step.reasoning, r),
                                     content=reword(step.content, r))  # fmt: skip
                step = careful.send(results)
        except StopIteration:
            return
