"""The curation report: what came in, what each rule dropped and why, what was kept, and —
when the miners' true policies are known — how well each rule and the whole pipeline
separate dishonest traces from honest ones.

Labels: a trace is *dishonest* when its miner played a policy that imitates shopping
(narrators, the offline cheat, the guesser, ...), *honest* when it played one that shops
honestly, and *neither* for careless or random play (kept or dropped on their merits, and
left out of precision). A trace is *retained* when it is kept or when a rule whose drops
keep their decisions in the set (``duplicates``: the kept episode it duplicates has them)
dropped it; the rule's own counts stay its row's and ``duplicates_per_miner``'s. The
headline is computed from the per-policy table (``policies``), so the two agree:
``honest_retention`` is the retained share of the honest policies' traces,
``dishonest_removal_recall`` the removed (not retained) share of the dishonest policies',
``dishonest_removal_precision`` the dishonest share of the dishonest and honest traces
removed. Each rule's ``dropped`` counts the traces it was the first to drop (pipeline
order); a rule whose reason column is decided whatever ran before (per episode, or over
every valid episode in SQL) also reports what it would flag on its own (``alone``), over
every valid trace. Reasons are folded so that they group (ids to ``…``, the episode's own
numbers to ``N``) but keep the rule's parameters: ``process score N < 0.5``.
``duplicates_per_miner`` says how many of each miner's episodes the ``duplicates`` rule
dropped, and whose episodes were kept instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.curation.config import CurateConfig
from shopbench.curation.ledger import Ledger
from shopbench.curation.recovery import KINDS, RECOVERY_TAG
from shopbench.curation.registry import Rule, fold, safe
from shopbench.curation.rules.duplicates import duplicates_by_miner
from shopbench.curation.truth import Truth

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
TOP_REASONS = 8


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


class Separation(BaseModel):
    """Dishonest / honest / neither counts of a set of traces, with the ratios."""

    model_config = ConfigDict(frozen=True)

    dropped: int
    dishonest: int
    honest: int
    neither: int
    precision: float | None = Field(description="dishonest / (dishonest + honest) dropped")
    recall: float | None = Field(description="dishonest dropped / all dishonest")
    honest_loss: float | None = Field(description="honest dropped / all honest")


class RuleEffect(BaseModel):
    """One rule's drops: how many, the commonest reasons, and (with truth) the separation."""

    model_config = ConfigDict(frozen=True)

    enabled: bool
    dropped: int
    reasons: dict[str, int]
    truth: Separation | None = None
    alone: Separation | None = None


class ContaminationCounts(BaseModel):
    """One test set's overlap with the valid episodes, and with the kept ones."""

    model_config = ConfigDict(frozen=True)

    test_queries: int
    sha256: str | None = Field(default=None, description="of the test file's bytes, as read")
    contaminated: int
    clean: int
    kept_contaminated: int
    kept_clean: int


class PolicyCounts(BaseModel):
    """One true policy's traces: in, kept, retained, and dropped by each rule."""

    model_config = ConfigDict(frozen=True)

    honest: bool | None
    episodes: int
    kept: int
    retained: int = Field(
        description="kept, or dropped as a duplicate of a kept episode (its decisions stay "
        "in the set): what the headline's retention, recall and precision count as not removed"
    )
    dropped_by_rule: dict[str, int]
    recovery: int

    @model_validator(mode="before")
    @classmethod
    def _retained_before_it_was_written(cls, data: Any) -> Any:
        # A report.json written before `retained` existed: its only rule that kept
        # decisions was `duplicates`.
        if isinstance(data, dict) and "retained" not in data and "kept" in data:
            dups = (data.get("dropped_by_rule") or {}).get("duplicates", 0)
            return {**data, "retained": data["kept"] + dups}
        return data


class Headline(NamedTuple):
    """The separation figures and the counts they are computed from."""

    precision: float | None
    recall: float | None
    retention: float | None
    honest: int  # honest traces in
    honest_kept: int
    honest_retained: int
    dishonest: int  # dishonest traces in
    dishonest_removed: int


def headline(policies: dict[str, PolicyCounts]) -> Headline:
    """The report's headline figures, from its per-policy table: honest retention = the
    honest policies' retained traces / their traces; dishonest removal recall = the
    dishonest policies' traces not retained / their traces; precision = dishonest removed /
    (dishonest removed + honest removed)."""
    honest = [p for p in policies.values() if p.honest is True]
    dishonest = [p for p in policies.values() if p.honest is False]
    h_in = sum(p.episodes for p in honest)
    h_retained = sum(p.retained for p in honest)
    d_in = sum(p.episodes for p in dishonest)
    d_removed = d_in - sum(p.retained for p in dishonest)
    h_removed = h_in - h_retained
    return Headline(
        precision=_ratio(d_removed, d_removed + h_removed), recall=_ratio(d_removed, d_in),
        retention=_ratio(h_retained, h_in), honest=h_in,
        honest_kept=sum(p.kept for p in honest), honest_retained=h_retained,
        dishonest=d_in, dishonest_removed=d_removed,
    )  # fmt: skip


class DuplicateCounts(BaseModel):
    """One miner's episodes dropped as duplicates of another episode's decisions."""

    model_config = ConfigDict(frozen=True)

    dropped: int
    of: dict[str, int] = Field(description="the miners whose episodes were kept instead")
    examples: dict[str, str] = Field(
        default_factory=dict, description="a few dropped episode ids → the kept episode's id"
    )


class DiagnosisCounts(BaseModel):
    """The episodes of one diagnosis kind (:mod:`shopbench.records.diagnosis`)."""

    model_config = ConfigDict(frozen=True)

    episodes: int
    kept: int
    dropped_by_rule: dict[str, int] = Field(default_factory=dict)


def _diagnoses(ledger: Ledger) -> dict[str, DiagnosisCounts]:
    rows = ledger.rows(
        "SELECT coalesce(failure, '(unread)') AS k, coalesce(drop_rule, '') AS r, count(*) "
        "FROM ep GROUP BY k, r ORDER BY k, r"
    )
    out: dict[str, dict[str, Any]] = {}
    for kind, rule, n in rows:
        entry = out.setdefault(kind, {"episodes": 0, "kept": 0, "dropped_by_rule": {}})
        entry["episodes"] += n
        if rule:
            entry["dropped_by_rule"][rule] = n
        else:
            entry["kept"] += n
    order = sorted(out.items(), key=lambda kv: (-kv[1]["episodes"], kv[0]))
    return {k: DiagnosisCounts(**v) for k, v in order}


class CurationReport(BaseModel):
    """Everything ``report.json`` holds."""

    model_config = ConfigDict(frozen=True)

    archive: str
    episodes_in: int
    kept: int
    dropped_by_rule: dict[str, int]
    rules: dict[str, RuleEffect]
    kept_per_intent: dict[str, int]
    diagnoses: dict[str, DiagnosisCounts] = Field(
        default_factory=dict,
        description="per diagnosis kind (how the episode ended), the episodes in and kept",
    )
    kept_per_cluster: dict[str, int]
    kept_per_miner: dict[str, int]
    duplicates_per_miner: dict[str, DuplicateCounts] = Field(
        default_factory=dict,
        description="per miner, its episodes dropped by the duplicates rule, by kept miner",
    )
    recovery_share: float | None = Field(description="kept episodes tagged recovery / kept")
    recovery_kinds: dict[str, int]
    recovery_share_of_successes: float | None
    contaminated: dict[str, ContaminationCounts]
    dishonest_removal_precision: float | None = None
    dishonest_removal_recall: float | None = None
    honest_retention: float | None = None
    policies: dict[str, PolicyCounts] = Field(default_factory=dict)
    weights: dict[str, float] = Field(default_factory=dict)
    files: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)


def _separation(ledger: Ledger, where: str, base: str = "TRUE") -> Separation:
    d, dh, h, n, all_d, all_h = ledger.rows(
        f"""SELECT count(*) FILTER ({where}),
                   count(*) FILTER (({where}) AND honest = FALSE),
                   count(*) FILTER (({where}) AND honest = TRUE),
                   count(*) FILTER (({where}) AND honest IS NULL),
                   count(*) FILTER (honest = FALSE), count(*) FILTER (honest = TRUE)
            FROM ep WHERE {base}"""
    )[0]
    return Separation(
        dropped=d, dishonest=dh, honest=h, neither=n, precision=_ratio(dh, dh + h),
        recall=_ratio(dh, all_d), honest_loss=_ratio(h, all_h),
    )  # fmt: skip


def _reasons(ledger: Ledger, rule: Rule[Any]) -> dict[str, int]:
    """The rule's commonest reasons, folded (:func:`~shopbench.curation.registry.fold`)."""
    counts: dict[str, int] = {}
    for reason, n in ledger.rows(
        "SELECT drop_reason, count(*) FROM ep WHERE drop_rule = ? GROUP BY drop_reason",
        [rule.name],
    ):
        folded = fold(reason or "", rule.keep_in_reasons)
        counts[folded] = counts.get(folded, 0) + n
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_REASONS]
    return dict(top)


def _counts(ledger: Ledger, column: str) -> dict[str, int]:
    rows = ledger.rows(
        f"SELECT coalesce({column}::VARCHAR, '(none)') AS k, count(*) AS n FROM ep "
        f"WHERE drop_rule IS NULL GROUP BY k ORDER BY n DESC, k"
    )
    return {k: n for k, n in rows}


def build_report(
    ledger: Ledger,
    cfg: CurateConfig,
    refused: dict[str, tuple[int, str]],
    *,
    truth: Truth | None,
    archive: str,
    test_set_sizes: dict[str, int] | None = None,
    test_set_digests: dict[str, str | None] | None = None,
) -> CurationReport:
    """The report of a ledger whose rules have run (`test_set_sizes`: queries per test set;
    `test_set_digests`: the sha256 of each test file)."""
    refused_rows = sum(n for n, _ in refused.values())
    if ledger.empty:
        total = kept = 0
    else:
        total = ledger.rows("SELECT count(*) FROM ep")[0][0]
        kept = ledger.kept_count()
    plan = cfg.plan()
    effects: dict[str, RuleEffect] = {}
    dropped: dict[str, int] = {}
    for rule, params in plan:
        n = 0 if ledger.empty else ledger.rows(
            "SELECT count(*) FROM ep WHERE drop_rule = ?", [rule.name]
        )[0][0]  # fmt: skip
        reasons = {} if ledger.empty else _reasons(ledger, rule)
        if rule.gate:  # shards refused and records that do not rebuild are the gate's
            n += refused_rows
            for _, why in refused.values():
                reasons[why] = reasons.get(why, 0) + 1
        sep = alone = None
        if truth is not None and not ledger.empty:
            sep = _separation(ledger, f"drop_rule = '{rule.name}'")
            if rule.alone:
                alone = _separation(ledger, f"{rule.column} IS NOT NULL", base=ledger.valid)
        effects[rule.name] = RuleEffect(
            enabled=params.enabled or rule.gate, dropped=n, reasons=reasons, truth=sep,
            alone=alone,
        )  # fmt: skip
        dropped[rule.name] = n
    recovery_kinds: dict[str, int] = {}
    recovered = successes = kept_recovery_successes = 0
    if not ledger.empty:
        for kind in KINDS:
            recovery_kinds[kind] = ledger.rows(
                "SELECT count(*) FROM ep WHERE drop_rule IS NULL AND list_contains(tags, ?)",
                [f"{RECOVERY_TAG}:{kind}"],
            )[0][0]
        recovered, successes, kept_recovery_successes = ledger.rows(
            f"""SELECT count(*) FILTER (drop_rule IS NULL
                                        AND list_contains(tags, '{RECOVERY_TAG}')),
                       count(*) FILTER (drop_rule IS NULL AND success),
                       count(*) FILTER (drop_rule IS NULL AND success
                                        AND list_contains(tags, '{RECOVERY_TAG}'))
                FROM ep"""
        )[0]
    contaminated: dict[str, ContaminationCounts] = {}
    for path, size in (test_set_sizes or {}).items():
        c, cl, kc, kcl = (0, 0, 0, 0) if ledger.empty else ledger.rows(
            f"""SELECT count(*) FILTER (list_contains(contaminated_by, ?)),
                      count(*) FILTER (NOT list_contains(coalesce(contaminated_by, []), ?)),
                      count(*) FILTER (drop_rule IS NULL AND list_contains(contaminated_by, ?)),
                      count(*) FILTER (drop_rule IS NULL
                                       AND NOT list_contains(coalesce(contaminated_by, []), ?))
               FROM ep WHERE {ledger.valid}""",
            [path, path, path, path],
        )[0]  # fmt: skip
        contaminated[path] = ContaminationCounts(
            test_queries=size, sha256=(test_set_digests or {}).get(path), contaminated=c,
            clean=cl, kept_contaminated=kc, kept_clean=kcl,
        )
    policies: dict[str, PolicyCounts] = {}
    if truth is not None and not ledger.empty:
        # A duplicate's decisions stay in the set, in the kept episode it duplicates: it
        # is retained (its own counts are the rule's and duplicates_per_miner's).
        keeping = [rule.name for rule, _ in plan if rule.keeps_decisions]
        retained = "drop_rule IS NULL" + "".join(
            f" OR drop_rule = '{name}'" for name in keeping
        )
        for policy, honest, n, k, r, rec in ledger.rows(
            f"""SELECT policy, any_value(honest), count(*), count(*) FILTER (drop_rule IS NULL),
                       count(*) FILTER ({retained}),
                       count(*) FILTER (drop_rule IS NULL AND list_contains(tags, '{RECOVERY_TAG}'))
                FROM ep WHERE policy IS NOT NULL GROUP BY policy ORDER BY policy"""
        ):
            by_rule = {
                r: c for r, c in ledger.rows(
                    "SELECT drop_rule, count(*) FROM ep WHERE policy = ? AND drop_rule IS NOT "
                    "NULL GROUP BY drop_rule ORDER BY drop_rule", [policy],
                )
            }  # fmt: skip
            policies[policy] = PolicyCounts(
                honest=honest, episodes=n, kept=k, retained=r, dropped_by_rule=by_rule,
                recovery=rec,
            )  # fmt: skip
    top = headline(policies) if policies else None
    duplicates: dict[str, dict[str, int]] = {}
    examples: dict[str, dict[str, str]] = {}
    pairs_found = [] if ledger.empty else duplicates_by_miner(ledger, TOP_REASONS)
    for miner, of_miner, n, pairs in pairs_found:
        duplicates.setdefault(miner, {})[of_miner] = n
        mine = examples.setdefault(miner, {})
        for dropped_id, kept_id in pairs:
            if len(mine) < TOP_REASONS:
                mine[dropped_id] = kept_id
    weights: dict[str, float] = {}
    if kept:
        lo, mean, hi = ledger.rows(
            "SELECT min(weight), avg(weight), max(weight) FROM ep WHERE drop_rule IS NULL"
        )[0]
        weights = {"min": round(lo, 4), "mean": round(mean, 4), "max": round(hi, 4)}
    return CurationReport(
        archive=archive,
        episodes_in=total + refused_rows,
        kept=kept,
        dropped_by_rule=dropped,
        rules=effects,
        kept_per_intent={} if ledger.empty else _counts(ledger, "intent"),
        diagnoses={} if ledger.empty else _diagnoses(ledger),
        kept_per_cluster={} if ledger.empty else _counts(ledger, "cluster"),
        kept_per_miner={} if ledger.empty else _counts(ledger, "miner"),
        duplicates_per_miner={
            m: DuplicateCounts(dropped=sum(of.values()), of=of, examples=examples[m])
            for m, of in sorted(
                duplicates.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
        },  # fmt: skip
        recovery_share=_ratio(recovered, kept),
        recovery_kinds=recovery_kinds,
        recovery_share_of_successes=_ratio(kept_recovery_successes, successes),
        contaminated=contaminated,
        dishonest_removal_precision=top.precision if top else None,
        dishonest_removal_recall=top.recall if top else None,
        honest_retention=top.retention if top else None,
        policies=policies,
        weights=weights,
        config=cfg.model_dump(mode="json"),
    )


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _total(policies: dict[str, PolicyCounts], honest: bool) -> PolicyCounts:
    """The policies of one label summed (a row of the table, its totals)."""
    mine = [p for p in policies.values() if p.honest is honest]
    by_rule: dict[str, int] = {}
    for p in mine:
        for rule, n in p.dropped_by_rule.items():
            by_rule[rule] = by_rule.get(rule, 0) + n
    return PolicyCounts(
        honest=honest, episodes=sum(p.episodes for p in mine), kept=sum(p.kept for p in mine),
        retained=sum(p.retained for p in mine), dropped_by_rule=dict(sorted(by_rule.items())),
        recovery=sum(p.recovery for p in mine),
    )  # fmt: skip


def _headline_sentence(r: CurationReport) -> str:
    """What the headline's figures are, in the per-policy table's counts."""
    h = headline(r.policies)
    honest_removed = h.honest - h.honest_retained
    return (
        f"From the table *By true policy*: honest retention {_cell(h.retention)} = "
        f"{h.honest_retained} of the honest policies' {h.honest} episodes retained "
        f"({h.honest_kept} kept, {h.honest_retained - h.honest_kept} dropped as duplicates "
        f"of a kept episode); dishonest removal recall {_cell(h.recall)} = "
        f"{h.dishonest_removed} of the dishonest policies' {h.dishonest} episodes removed; "
        f"precision {_cell(h.precision)} = {h.dishonest_removed} dishonest of the "
        f"{h.dishonest_removed + honest_removed} dishonest and honest episodes removed."
    )


def render_markdown(r: CurationReport) -> str:
    """The report as Markdown: the headline, each rule, the policies, contamination."""
    lines = [
        "# Curation report",
        "",
        f"Archive `{r.archive}`: **{r.episodes_in}** episodes in, **{r.kept}** kept.",
        "",
    ]
    if r.dishonest_removal_precision is not None or r.honest_retention is not None:
        lines += [
            "| dishonest removal precision | dishonest removal recall | honest retention |",
            "|---|---|---|",
            f"| {_cell(r.dishonest_removal_precision)} | {_cell(r.dishonest_removal_recall)} "
            f"| {_cell(r.honest_retention)} |",
            "",
        ]
        if r.policies:
            lines += [_headline_sentence(r), ""]
    lines += [
        "## Rules (pipeline order; each drop charged to the first rule that drops it)",
        "",
        "| rule | on | dropped | dishonest | honest | neither | precision | recall | "
        "honest loss | alone: precision | alone: recall | alone: honest loss |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in r.rules.items():
        t, a = e.truth, e.alone
        lines.append(
            f"| {name} | {'yes' if e.enabled else 'no'} | {e.dropped} | "
            f"{_cell(t and t.dishonest)} | {_cell(t and t.honest)} | {_cell(t and t.neither)} | "
            f"{_cell(t and t.precision)} | {_cell(t and t.recall)} | "
            f"{_cell(t and t.honest_loss)} | {_cell(a and a.precision)} | "
            f"{_cell(a and a.recall)} | {_cell(a and a.honest_loss)} |"
        )
    lines += ["", "### Commonest reasons", ""]
    for name, e in r.rules.items():
        for why, n in e.reasons.items():
            lines.append(f"- **{name}** ({n}): {why}")
    if r.policies:
        lines += [
            "", "## By true policy", "",
            "Retained: kept, or dropped as a duplicate of a kept episode (its decisions stay in "
            "the set). The headline is computed from the two totals rows.",
            "",
            "| policy | honest | episodes | kept | retained | recovery kept | dropped by rule |",
            "|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        rows = list(r.policies.items())
        for label, honest in (("all honest policies", True), ("all dishonest policies", False)):
            rows.append((f"**{label}**", _total(r.policies, honest)))
        for name, p in rows:
            rules = ", ".join(f"{k} {v}" for k, v in p.dropped_by_rule.items())
            lines.append(
                f"| {name} | {_cell(p.honest)} | {p.episodes} | {p.kept} | {p.retained} "
                f"| {p.recovery} | {rules} |"
            )
    if r.duplicates_per_miner:
        lines += [
            "", "## Duplicates (the same decisions as a kept episode of the same task)", "",
            "| miner | duplicates dropped | kept instead (miner: episodes) |",
            "|---|---|---|",
        ]  # fmt: skip
        for miner, d in r.duplicates_per_miner.items():
            of = ", ".join(f"{safe(k, 64)}: {v}" for k, v in d.of.items())
            lines.append(f"| {safe(miner, 64)} | {d.dropped} | {of} |")
    lines += [
        "", "## Recovery", "",
        f"Recovery share of the kept episodes: {_cell(r.recovery_share)} (of the kept "
        f"successes: {_cell(r.recovery_share_of_successes)}); by kind: "
        + ", ".join(f"{k} {v}" for k, v in r.recovery_kinds.items()) + ".",
        "", "## Contamination", "",
    ]  # fmt: skip
    if r.contaminated:
        lines += [
            "| test set | test queries | contaminated | clean | kept contaminated | kept clean |",
            "|---|---|---|---|---|---|",
        ]
        for name, c in r.contaminated.items():
            lines.append(
                f"| `{name}` | {c.test_queries} | {c.contaminated} | {c.clean} | "
                f"{c.kept_contaminated} | {c.kept_clean} |"
            )
    else:
        lines.append("No test set given.")
    if r.diagnoses:
        lines += [
            "", "## How the episodes ended (diagnosis)", "",
            "| diagnosis | episodes | kept | dropped by rule |", "|---|---|---|---|",
        ]  # fmt: skip
        for kind, counts_of in r.diagnoses.items():
            rules = ", ".join(f"{k} {v}" for k, v in counts_of.dropped_by_rule.items()) or "–"
            lines.append(f"| {kind} | {counts_of.episodes} | {counts_of.kept} | {rules} |")
    lines += ["", "## Kept", ""]
    for title, counts in (("intent", r.kept_per_intent), ("miner", r.kept_per_miner)):
        shown = ", ".join(f"{safe(k, 64)} {v}" for k, v in counts.items())
        lines.append(f"- per {title}: {shown}")
    lines.append(f"- clusters: {len(r.kept_per_cluster)}")
    lines.append(f"- weights: {r.weights}")
    return "\n".join(lines) + "\n"


def write_report(report: CurationReport, out: Path) -> None:
    """Write ``report.json`` and ``report.md`` into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_JSON).write_text(
        json.dumps(report.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8"
    )
    (out / REPORT_MD).write_text(render_markdown(report), encoding="utf-8")
