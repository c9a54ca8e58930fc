"""The curation report: what came in, what each rule dropped and why, what was kept, and —
when the miners' true policies are known — how well each rule and the whole pipeline
separate dishonest traces from honest ones.

Labels: a trace is *dishonest* when its miner played a policy that imitates shopping
(narrators, the offline cheat, the guesser, ...), *honest* when it played one that shops
honestly, and *neither* for careless or random play (kept or dropped on their merits, and
left out of precision). So ``dishonest_removal_precision`` is the share of dishonest traces
among the dishonest and honest traces removed, ``dishonest_removal_recall`` the share of
dishonest traces removed, ``honest_retention`` the share of honest traces kept; a trace the
``duplicates`` rule drops counts as kept in all three (its decisions stay in the set, in the
kept episode it duplicates; its counts are the rule's own). Each rule's
``dropped`` counts the traces it was the first to drop (pipeline order); rules that decide
on one episode alone, and the miner-level ``claims`` rule, also report what they would flag
on their own (``alone``), over every valid trace. ``duplicates_per_miner`` says how many of
each miner's episodes the ``duplicates`` rule dropped, and whose episodes were kept instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.curation.config import RULES, CurateConfig
from shopbench.curation.ledger import Ledger
from shopbench.curation.recovery import KINDS, RECOVERY_TAG
from shopbench.curation.rules import safe
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
    """One true policy's traces: in, kept, and dropped by each rule."""

    model_config = ConfigDict(frozen=True)

    honest: bool | None
    episodes: int
    kept: int
    dropped_by_rule: dict[str, int]
    recovery: int


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


def _reasons(ledger: Ledger, rule: str) -> dict[str, int]:
    rows = ledger.rows(
        """SELECT regexp_replace(regexp_replace(drop_reason, '[0-9a-f]{16,}', '…', 'g'),
                                 '[0-9]+(\\.[0-9]+)?', 'N', 'g') AS r, count(*) AS n
           FROM ep WHERE drop_rule = ? GROUP BY r ORDER BY n DESC, r LIMIT ?""",
        [rule, TOP_REASONS],
    )
    return {r: n for r, n in rows}


def _counts(ledger: Ledger, column: str) -> dict[str, int]:
    rows = ledger.rows(
        f"SELECT coalesce({column}::VARCHAR, '(none)') AS k, count(*) AS n FROM ep "
        f"WHERE drop_rule IS NULL GROUP BY k ORDER BY n DESC, k"
    )
    return {k: n for k, n in rows}


_ALONE = {
    "validity": "r_validity IS NOT NULL",
    "contamination": "r_contamination IS NOT NULL",
    "outcome": "r_outcome IS NOT NULL",
    "judge": "r_judge IS NOT NULL",
}


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
    enabled = {r: getattr(cfg, r).enabled for r in RULES}
    enabled["validity"] = True  # records that do not rebuild are always rejected
    effects: dict[str, RuleEffect] = {}
    dropped: dict[str, int] = {}
    for rule in RULES:
        n = 0 if ledger.empty else ledger.rows(
            "SELECT count(*) FROM ep WHERE drop_rule = ?", [rule]
        )[0][0]  # fmt: skip
        reasons = {} if ledger.empty else _reasons(ledger, rule)
        if rule == "validity":
            n += refused_rows
            for _, why in refused.values():
                reasons[why] = reasons.get(why, 0) + 1
        sep = alone = None
        if truth is not None and not ledger.empty:
            sep = _separation(ledger, f"drop_rule = '{rule}'")
            if rule in _ALONE and rule != "validity":
                alone = _separation(ledger, _ALONE[rule], base="r_validity IS NULL")
            elif rule == "narrator":
                alone = _separation(
                    ledger, f"narrator_score >= {cfg.narrator.threshold}",
                    base="r_validity IS NULL",
                )  # fmt: skip
            elif rule == "structure":
                alone = _separation(ledger, "r_loops IS NOT NULL", base="r_validity IS NULL")
            elif rule == "claims":
                alone = _separation(ledger, "claims_why IS NOT NULL", base="r_validity IS NULL")
        effects[rule] = RuleEffect(
            enabled=enabled[rule], dropped=n, reasons=reasons, truth=sep, alone=alone
        )
        dropped[rule] = n
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
            """SELECT count(*) FILTER (list_contains(contaminated_by, ?)),
                      count(*) FILTER (NOT list_contains(coalesce(contaminated_by, []), ?)),
                      count(*) FILTER (drop_rule IS NULL AND list_contains(contaminated_by, ?)),
                      count(*) FILTER (drop_rule IS NULL
                                       AND NOT list_contains(coalesce(contaminated_by, []), ?))
               FROM ep WHERE r_validity IS NULL""",
            [path, path, path, path],
        )[0]  # fmt: skip
        contaminated[path] = ContaminationCounts(
            test_queries=size, sha256=(test_set_digests or {}).get(path), contaminated=c,
            clean=cl, kept_contaminated=kc, kept_clean=kcl,
        )
    precision = recall = retention = None
    policies: dict[str, PolicyCounts] = {}
    if truth is not None and not ledger.empty:
        # A duplicate's decisions stay in the set, in the kept episode it duplicates: it
        # counts as kept (its own counts are the duplicates rule's and duplicates_per_miner).
        whole = _separation(ledger, "drop_rule IS NOT NULL AND drop_rule <> 'duplicates'")
        precision, recall = whole.precision, whole.recall
        retention = None if whole.honest_loss is None else round(1 - whole.honest_loss, 4)
        for policy, honest, n, k, rec in ledger.rows(
            f"""SELECT policy, any_value(honest), count(*), count(*) FILTER (drop_rule IS NULL),
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
                honest=honest, episodes=n, kept=k, dropped_by_rule=by_rule, recovery=rec
            )
    duplicates: dict[str, dict[str, int]] = {}
    examples: dict[str, dict[str, str]] = {}
    for miner, of_miner, n, pairs in ledger.duplicates_by_miner(TOP_REASONS):
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
        dishonest_removal_precision=precision,
        dishonest_removal_recall=recall,
        honest_retention=retention,
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
            "| policy | honest | episodes | kept | recovery kept | dropped by rule |",
            "|---|---|---|---|---|---|",
        ]  # fmt: skip
        for name, p in r.policies.items():
            rules = ", ".join(f"{k} {v}" for k, v in p.dropped_by_rule.items())
            lines.append(
                f"| {name} | {_cell(p.honest)} | {p.episodes} | {p.kept} | {p.recovery} | {rules} |"
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
