"""The curation report counted from the ledger: rules, reasons, separation, policies,
duplicates, diagnoses and recovery (see :mod:`shopbench.curation.report`)."""

from __future__ import annotations

from typing import Any

from shopbench.curation.config import CurateConfig
from shopbench.curation.ledger import Ledger
from shopbench.curation.recovery import KINDS, RECOVERY_TAG
from shopbench.curation.registry import Rule, fold
from shopbench.curation.report.model import (
    TOP_REASONS,
    ContaminationCounts,
    CurationReport,
    DiagnosisCounts,
    DuplicateCounts,
    PolicyCounts,
    RuleEffect,
    Separation,
    headline,
    ratio,
)
from shopbench.curation.rules.duplicates import duplicates_by_miner
from shopbench.curation.truth import Truth


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
        dropped=d, dishonest=dh, honest=h, neither=n, precision=ratio(dh, dh + h),
        recall=ratio(dh, all_d), honest_loss=ratio(h, all_h),
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
        recovery_share=ratio(recovered, kept),
        recovery_kinds=recovery_kinds,
        recovery_share_of_successes=ratio(kept_recovery_successes, successes),
        contaminated=contaminated,
        dishonest_removal_precision=top.precision if top else None,
        dishonest_removal_recall=top.recall if top else None,
        honest_retention=top.retention if top else None,
        policies=policies,
        weights=weights,
        config=cfg.model_dump(mode="json"),
    )
