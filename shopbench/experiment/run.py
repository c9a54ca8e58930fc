"""The experiment's stages, each resumable: a stage whose marker exists is not redone.

``OUT`` holds, in the order the stages write them::

    config.json                  the config the folder was started with (a rerun must match)
    arena/                       the arena's folder, when the config plays one
    arms/<arm>/curated/          that arm's curation (shopbench curate's --out)
    arms/<arm>/sft/              its SFT rows (distill build's --out)
    heldout.jsonl, heldout.json  the held-out tasks and their product-group check
    budget.json                  the turn budget: the trained assistant turns' lengths
    steps/reference.jsonl        the reference episodes step accuracy is measured on
    arms/<arm>/train/            its training (distill train's --out; resumed from a checkpoint)
    eval/<arm>/                  its evaluation on the held-out tasks (distill eval's files,
                                 and steps.json: its step accuracy)
    stages.json                  each stage's wall time, and when it ran
    report.json, report.md, plot.svg

Every curation and build runs before any training, and the held-out tasks, the turn budget
and the reference episodes are settled before any training too, so an arm with too few rows,
a held-out set that shares product groups with the training data or a turn budget that cuts
the trained turns stops the run before the CPU is spent. Then the arms run in the config's
order: ``base`` is evaluated, each other arm trained and evaluated, the report rewritten
after each (put ``base`` last to have a trained arm's answer first: the base is the cheaper
to rerun); step accuracy comes last, arm by arm (a model that has not learned the call
format decodes every step to the turn budget, so it costs more than the arm's ASR and
answers a smaller question). A run stopped between stages (killed, or its machine taken
back) resumes at the next stage, and the report holds every arm evaluated so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from shopbench.agents.registry import make_policy
from shopbench.archive.jsonl import read_trajectories
from shopbench.archive.signing import Verifier
from shopbench.catalog.store import Catalog
from shopbench.chat import EpisodeLimits
from shopbench.curation.curated import read_curated
from shopbench.curation.errors import EmptyResult
from shopbench.curation.pipeline import curate
from shopbench.curation.truth import load_truth
from shopbench.distill.budget import TurnBudget, turn_budget, turn_lengths
from shopbench.distill.config import load_train_config
from shopbench.distill.dataset import BuildConfig as SFTBuildConfig
from shopbench.distill.dataset import build_sft, read_report
from shopbench.distill.errors import DistillError
from shopbench.distill.rows import RowFormat
from shopbench.distill.templates import training_template
from shopbench.distill.token_budget import read_token_sample, sample_to_tokens
from shopbench.distill.trainer import train
from shopbench.env.env import ShoppingEnv
from shopbench.errors import ShopbenchError
from shopbench.evaluate.trained.overlap import named_product_ids
from shopbench.evaluate.trained.steps import play_references
from shopbench.experiment.arms import UNTRAINED, Arm, curation_of, rows_of, seed_offset
from shopbench.experiment.config import ExperimentConfig
from shopbench.experiment.errors import ExperimentError
from shopbench.experiment.evaluations import evaluate_arm, play_baseline, steps_of
from shopbench.experiment.folder import ARENA_DIR, HeldOut, Log, PlayArena, Stages, train_data
from shopbench.experiment.report import write_report
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.generate import BuildConfig as TaskBuildConfig
from shopbench.tasks.generate import build_tasks
from shopbench.tasks.io import read_tasks, write_tasks
from shopbench.tasks.split import task_groups

EVALUATION_KEYS = frozenset({"eval", "arms"})
"""Config keys whose change leaves the arena, the curations, the rows and the trainings of
the arms kept valid: only the held-out draw and the evaluations are redone."""
EXECUTION_KEYS = frozenset({"eval.concurrency", "eval.turn_timeout_s"})
"""Config keys that change how fast an evaluation runs, not what it measures: each episode
draws fresh opaque product ids (its own tokens), so no two runs of an evaluation see the
same observations, and the episodes a run plays at once are a matter of speed alone. A
change to them alone keeps every stage, an evaluation's journal included."""
ORDER_KEYS = frozenset({"arms", "eval.baselines", "eval.decoding"})
"""Config lists whose order says when each entry runs, not what it measures: an arm trains
on its own rows under its own seed and is evaluated on the same held-out tasks whichever
runs first. Reordering them alone keeps every stage (put the arm whose answer is wanted
first at the front of a running experiment)."""
SETTLED_FILES = ("heldout.jsonl", "heldout.json", "budget.json")
"""The files a change of the evaluation keys removes, to be settled again."""


def _at(config: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted key (``eval.concurrency``); None where there is none."""
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _measured(config: dict[str, Any]) -> dict[str, Any]:
    """What `config` measures: less its execution keys, its order keys' lists as sets."""

    def part(value: Any, dotted: str) -> Any:
        if isinstance(value, dict):
            return {k: part(v, f"{dotted}.{k}") for k, v in value.items()
                    if f"{dotted}.{k}" not in EXECUTION_KEYS}  # fmt: skip
        if dotted in ORDER_KEYS and isinstance(value, list):
            return sorted(value, key=str)
        return value

    return {k: part(v, k) for k, v in config.items()}


def _settle_folder(config: ExperimentConfig, out: Path, log: Log) -> None:
    """Start `out` with `config`, or check that it was started with the same config. A change
    of the evaluation or of the arms alone redraws the held-out tasks and redoes every
    evaluation (an arm's training stays); any other change is an error."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.json"
    mine = config.model_dump(mode="json")
    if path.is_file():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        # A key added since the folder started ran as what is now its default; a key since
        # removed fails validation: compared as written, so named as a difference.
        with contextlib.suppress(ValidationError):
            theirs = ExperimentConfig.model_validate(theirs).model_dump(mode="json")
        measured, started = _measured(mine), _measured(theirs)
        changed = sorted(k for k in set(mine) | set(theirs)
                         if measured.get(k) != started.get(k))  # fmt: skip
        if not changed:
            if mine != theirs:
                faster = [k for k in sorted(EXECUTION_KEYS) if _at(mine, k) != _at(theirs, k)]
                order = [k for k in sorted(ORDER_KEYS) if _at(mine, k) != _at(theirs, k)]
                if faster:
                    log(f"the config's {' and '.join(faster)} changed: kept, for it changes "
                        "how fast the evaluations run, not what they measure")  # fmt: skip
                if order:
                    log(f"the config's {' and '.join(order)} reordered: kept, for the order "
                        "says what runs first, not what is measured")  # fmt: skip
                path.write_text(json.dumps(mine, indent=2) + "\n", encoding="utf-8")
            return
        if not set(changed) <= EVALUATION_KEYS:
            raise ExperimentError(
                f"{out} holds an experiment of another config (differs in: "
                f"{', '.join(changed)}); give another --out, or the config it was started with"
            )
        log(f"the config's {' and '.join(changed)} changed: the held-out tasks are drawn "
            "again and every arm evaluated again")  # fmt: skip
        for name in SETTLED_FILES:
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "eval", ignore_errors=True)
        shutil.rmtree(out / "steps", ignore_errors=True)
    path.write_text(json.dumps(mine, indent=2) + "\n", encoding="utf-8")


def _archive(
    config: ExperimentConfig, stages: Stages, play: PlayArena | None
) -> tuple[Path, Path | None, Path]:
    """The archive folder, the truth file and the catalog (the arena played when asked)."""
    if config.archive is not None:
        a = config.archive
        return a.path, a.truth, a.catalog
    assert config.arena is not None
    folder = stages.out / ARENA_DIR
    if play is None:
        raise ExperimentError("the config plays an arena, but no arena runner was given")
    arena = config.arena
    stages.run("arena", folder, lambda: play(arena, folder))
    report = json.loads((folder / "arena.json").read_text(encoding="utf-8"))
    played = report.get("catalog")
    catalog = Path(str(played.get("directory") if isinstance(played, dict) else played))
    inside = folder / catalog.name  # the arena builds its catalog in its folder, moved or not
    return folder / "archive", folder / "arena.json", inside if inside.is_dir() else catalog


def _curate(
    config: ExperimentConfig, stages: Stages, arm: Arm, archive: Path, truth: Path | None,
    verifier: Verifier | None,
) -> None:
    cfg = curation_of(
        arm, recovery_weight=config.recovery_weight, mask_refused=config.mask_refused
    )
    assert cfg is not None
    folder = stages.arm(arm) / "curated"

    def work() -> None:
        try:
            curate(archive, folder, cfg, verifier=verifier,
                   truth=load_truth(truth) if truth is not None else None)  # fmt: skip
        except EmptyResult as e:
            raise ExperimentError(f"arm {arm}: curation kept no episode ({e})") from None

    stages.run(f"curate {arm}", folder, work)


def _build(config: ExperimentConfig, stages: Stages, arm: Arm) -> int:
    """Build the arm's rows (once); its train rows."""
    folder = stages.arm(arm) / "sft"
    view = config.observation_view
    build = SFTBuildConfig(
        format=RowFormat(config.format), seed=config.seed, view=view.name, history=view.history,
        prompt=view.prompt, intents=config.train_intents,
    )  # fmt: skip

    def work() -> None:
        try:
            build_sft(stages.arm(arm) / "curated", folder, build)
        except ShopbenchError as e:
            raise ExperimentError(f"arm {arm}: no training rows ({e})") from None

    stages.run(f"build {arm}", folder, work)
    return int(read_report(folder).get("rows", {}).get("train", 0))


def _train_settings(config: ExperimentConfig, *, offset: int = 0) -> Any:
    overrides = {"seed": config.seed + offset, **config.train.overrides}
    return load_train_config(Path(config.train.config), **overrides)


def _sample(config: ExperimentConfig, stages: Stages, arm: Arm) -> int:
    """Cut the arm's rows to ``train.tokens`` (once), distinct tasks first; its rows taken.
    Without a token budget the arm trains on its whole pool."""
    if config.train.tokens is None:
        return int(read_report(stages.arm(arm) / "sft").get("rows", {}).get("train", 0))
    # transformers is imported where a tokenizer is loaded, not with the module: it takes
    # seconds, and a run without a token budget, or resumed past these stages, never needs it
    from transformers import AutoTokenizer

    folder = train_data(config, stages, arm)
    budget = config.train.tokens

    def work() -> None:
        tokenizer = AutoTokenizer.from_pretrained(str(config.model))
        max_length = _train_settings(config).max_length or 1 << 30
        took = sample_to_tokens(
            stages.arm(arm) / "sft", folder, tokenizer=tokenizer,
            template=training_template(tokenizer), budget=budget, max_length=max_length,
            seed=config.seed,
        )  # fmt: skip
        stages.log(f"sample {arm}: {took.tokens:,} tokens in {took.rows} rows of {took.tasks} "
                   f"tasks (pool: {took.pool_rows} rows of {took.pool_tasks} tasks, "
                   f"{took.pool_tokens:,} tokens)")  # fmt: skip

    stages.run(f"sample {arm}", folder, work)
    sample = read_token_sample(folder)
    return sample.rows if sample is not None else 0


def _heldout(config: ExperimentConfig, stages: Stages, catalog: Path) -> HeldOut:
    """Draw the held-out tasks (once): tasks of held-out product groups, leaving out any
    whose group a training row names a product of; ExperimentError when too few are left."""
    path = stages.out / "heldout.jsonl"
    check = stages.out / "heldout.json"
    if path.is_file() and check.is_file():
        return HeldOut.model_validate_json(check.read_text(encoding="utf-8"))
    spec = config.eval
    drawn = build_tasks(TaskBuildConfig(
        catalog=catalog, intents=spec.intents, n=spec.tasks * spec.draw_factor, split="heldout",
        seed=spec.seed,
    )).tasks  # fmt: skip
    store = Catalog.open(catalog)
    touched_ids: set[str] = set()  # catalog ids of the products a training episode called
    for arm in config.pooled_arms:
        for episode in read_curated(stages.arm(arm) / "curated"):
            played = episode.trajectory
            if config.train_intents is None or played.intent in config.train_intents:
                messages = [m.model_dump(mode="json") for m in played.messages]
                touched_ids.update(named_product_ids(messages, played.token_map))
    found = store.get(sorted(touched_ids))
    train_groups = {p.group_key for p in found if p is not None}
    groups = task_groups(drawn, store)
    clean = [t for t in drawn if not set(groups[t.id].split("+")) & train_groups]
    # The intents in turn, so a short set still holds every intent asked for.
    by_intent: dict[str, list[Any]] = {}
    for t in clean:
        by_intent.setdefault(t.intent, []).append(t)
    per = spec.tasks // len(spec.intents)
    chosen = [t for i in spec.intents for t in by_intent.get(i, [])[:per]]
    if len(chosen) < per * len(spec.intents):
        raise ExperimentError(
            f"only {len(chosen)} of {len(drawn)} held-out tasks are of product groups no training "
            f"row touches; {per * len(spec.intents)} were asked for (a bigger catalog, or fewer "
            "eval.tasks)"
        )
    kept_groups = {groups[t.id] for t in chosen}
    shared = {g for t in chosen for g in groups[t.id].split("+")} & train_groups
    held = HeldOut(
        drawn=len(drawn), touched=len(drawn) - len(clean), kept=len(chosen),
        groups=len(kept_groups), train_groups=len(train_groups), shared=len(shared),
    )  # fmt: skip
    write_tasks(path, chosen)
    check.write_text(held.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return held


def _train(config: ExperimentConfig, stages: Stages, arm: Arm) -> None:
    folder = stages.arm(arm) / "train"
    cfg = _train_settings(config, offset=seed_offset(arm))
    data = train_data(config, stages, rows_of(arm))

    def work() -> None:
        resume = any((folder / "checkpoints").glob("checkpoint-*"))
        train(str(config.model), data, folder, cfg, resume=resume)

    stages.run(f"train {arm}", folder, work, keep=True)


def _budget(config: ExperimentConfig, stages: Stages) -> TurnBudget:
    """The turn budget (once): each trained arm's assistant turns measured in the model's
    tokenizer, and the largest of the arms' budgets, so that no arm has more than
    ``eval.max_cut_share`` of its own turns cut; ExperimentError when the config's
    max_tokens cuts too many of any arm's turns."""
    path = stages.out / "budget.json"
    if path.is_file():
        return TurnBudget.model_validate_json(path.read_text(encoding="utf-8"))
    from transformers import AutoTokenizer  # lazy, as in _sample

    tokenizer = AutoTokenizer.from_pretrained(str(config.model))
    template = training_template(tokenizer)
    spec = config.eval
    budgets: dict[str, TurnBudget] = {}
    for arm in config.trained_arms:
        lengths = turn_lengths(train_data(config, stages, rows_of(arm)), tokenizer, template)
        try:
            budgets[arm] = turn_budget(
                lengths, given=spec.max_tokens, max_cut_share=spec.max_cut_share
            )
        except DistillError as e:
            raise ExperimentError(f"eval.max_tokens: arm {arm}: {e}") from None
    largest = max(budgets.values(), key=lambda b: b.budget)
    budget = largest.model_copy(update={"arms": budgets})
    path.write_text(budget.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return budget


def _references(
    config: ExperimentConfig, stages: Stages, catalog: Path
) -> list[Trajectory]:
    """The reference policy's episodes of the first ``eval.step_tasks`` held-out tasks
    (once), each under its replayable key."""
    folder = stages.out / "steps"
    path = folder / "reference.jsonl"
    spec = config.eval
    if spec.step_tasks == 0:
        return []

    def work() -> None:
        tasks = read_tasks(stages.out / "heldout.jsonl").tasks[: spec.step_tasks]
        env = ShoppingEnv.open(catalog, EpisodeLimits(max_turns=spec.max_turns))
        policy = make_policy(spec.step_policy, catalog=env.catalog, seed=config.seed)
        played = asyncio.run(play_references(env, tasks, policy, config.seed))
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(t.model_dump_json() + "\n" for t in played), encoding="utf-8")

    stages.run("references", folder, work)
    return list(read_trajectories(path))


def run_experiment(
    config: ExperimentConfig, out: Path, *, verifier: Verifier | None,
    play_arena: PlayArena | None = None, log: Log = print,
) -> Path:
    """Run (or resume) the experiment into `out`; the path of ``report.json``."""
    out = Path(out)
    _settle_folder(config, out, log)
    stages = Stages(out, log)
    archive, truth, catalog = _archive(config, stages, play_arena)
    rows: dict[str, int] = {}
    for arm in config.pooled_arms:
        _curate(config, stages, arm, archive, truth, verifier)
        _build(config, stages, arm)
        rows[arm] = _sample(config, stages, arm)
    short = {a: n for a, n in rows.items() if n < config.min_rows}
    if short:
        said = ", ".join(f"{a} {n}" for a, n in short.items())
        raise ExperimentError(
            f"too few training rows for an arm ({said}; min_rows {config.min_rows}): play a "
            "bigger arena (more rounds or tasks), or lower min_rows"
        )
    held = _heldout(config, stages, catalog)
    log(f"held-out: {held.kept} tasks in {held.groups} product groups; {held.touched} of "
        f"{held.drawn} drawn left out for sharing a group with training rows")  # fmt: skip
    budget = _budget(config, stages)
    log(f"turn budget: {budget.budget} tokens (trained turns: median {budget.median:.0f}, "
        f"p95 {budget.p95:.0f}, longest {budget.max}; {budget.cut_share:.1%} cut)")  # fmt: skip
    references = _references(config, stages, catalog)
    report = Path()
    for policy in config.eval.baselines:  # scripted: seconds, so first
        play_baseline(config, stages, catalog, policy)
        report = write_report(config, stages, held, catalog)
    arms = config.arms
    first, *others = config.eval.decoding
    for arm in arms:
        if arm not in UNTRAINED:
            _train(config, stages, arm)
        evaluate_arm(config, stages, arm, catalog, budget, first)
        report = write_report(config, stages, held, catalog)
        log(f"report: {report} (arms so far: {arm} last)")
    for decoding in others:  # every arm under the first decoding before any under the next
        for arm in arms:
            evaluate_arm(config, stages, arm, catalog, budget, decoding)
            report = write_report(config, stages, held, catalog)
            log(f"report: {report} (arms so far: {arm} {decoding} last)")
    for arm in arms:
        steps_of(config, stages, arm, catalog, budget, references)
        report = write_report(config, stages, held, catalog)
        log(f"report: {report} (step accuracy so far: {arm} last)")
    return report
