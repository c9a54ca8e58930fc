"""The experiment's evaluations: each arm under each decoding, the scripted baselines and
the step accuracy, every one played on the held-out tasks into ``eval/<key>/`` (or
``steps/<arm>/``) once, an interrupted one resumed from its journal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from shopbench.agents.local.engine import release_engines
from shopbench.agents.local.grammar import Decoding
from shopbench.agents.options import PolicyOptions
from shopbench.agents.registry import make_policy
from shopbench.catalog.store import Catalog
from shopbench.chat import EpisodeLimits
from shopbench.distill.budget import TurnBudget
from shopbench.distill.dataset import load_sft
from shopbench.env.env import ShoppingEnv
from shopbench.evaluate.intervals import BootstrapConfig
from shopbench.evaluate.trained.journal import appender, read_journal
from shopbench.evaluate.trained.report import write_model_eval
from shopbench.evaluate.trained.run import ModelEvalConfig, evaluate_model
from shopbench.evaluate.trained.steps import step_accuracy
from shopbench.experiment.arms import UNTRAINED, Arm, rows_of
from shopbench.experiment.config import ExperimentConfig
from shopbench.experiment.folder import Stages, baseline_key, eval_key, model_dir, train_data
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.io import read_tasks
from shopbench.tasks.split import task_groups
from shopbench.trajectory.loop import RunLimits

KV_CACHE_TOKENS = 65_536
"""Tokens of earlier turns' keys and values an evaluated model keeps across its episodes'
turns (about 3 GB for SmolLM2-135M in float32): in an append-only view a turn then prefills
only its new tokens; the tokens generated are the same either way. The held-out evaluation
keeps them; step accuracy does not (its 164 teacher-forced turns of up to 3,000 tokens, 16
at a time, share little but the system prompt, and with them kept that stage once grew past
this machine's 24 GB)."""


def policy_options(
    config: ExperimentConfig, budget: TurnBudget, *, kept_tokens: int = 0,
    decoding: Decoding = "free",
) -> PolicyOptions:  # fmt: skip
    spec = config.eval
    return PolicyOptions(
        max_tokens=budget.budget, turn_timeout_s=spec.turn_timeout_s, view=config.view,
        max_batch=spec.concurrency, kv_cache_tokens=kept_tokens,
        decoding=decoding if decoding != "free" else None,
    )  # fmt: skip


def steps_of(
    config: ExperimentConfig, stages: Stages, arm: Arm, catalog: Path, budget: TurnBudget,
    references: list[Trajectory],
) -> None:
    """The arm's step accuracy on the reference episodes (once): ``eval/<arm>/steps.json``
    (the report) and ``steps.jsonl`` (each step)."""
    if not references:
        return
    folder = stages.out / "steps" / arm
    spec = config.eval

    def work() -> None:
        tasks = read_tasks(stages.out / "heldout.jsonl").tasks[: spec.step_tasks]
        env = ShoppingEnv.open(catalog, EpisodeLimits(max_turns=spec.max_turns))
        model = f"hf:{model_dir(stages, arm, config)}"
        options = policy_options(config, budget).options(model, 1, sample=0)
        policy = make_policy(model, catalog=env.catalog, seed=config.seed, **options)
        groups = task_groups(tasks, Catalog.open(catalog))
        report, steps = asyncio.run(step_accuracy(
            env, tasks, references, policy, seed=config.seed, groups=groups,
            concurrency=spec.concurrency, boot=BootstrapConfig(seed=config.seed),
        ))  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "steps.jsonl").write_text(
            "".join(s.model_dump_json() + "\n" for s in steps), encoding="utf-8"
        )
        (folder / "steps.json").write_text(report.model_dump_json(indent=2) + "\n",
                                           encoding="utf-8")  # fmt: skip
        release_engines()

    stages.run(f"steps {arm}", folder, work)


def evaluate_arm(
    config: ExperimentConfig, stages: Stages, arm: Arm, catalog: Path, budget: TurnBudget,
    decoding: Decoding,
) -> None:
    """The arm's evaluation under `decoding` on the held-out tasks (once)."""
    spec = config.eval
    train_rows = train_data(config, stages, rows_of(arm)) / "train.parquet"
    options = policy_options(config, budget, kept_tokens=KV_CACHE_TOKENS, decoding=decoding)
    if arm == PROMPTED:
        options = options.model_copy(update={"example": _example(config, stages)})
    eval_config = ModelEvalConfig(
        model=f"hf:{model_dir(stages, arm, config)}", samples=spec.samples,
        concurrency=spec.concurrency, seed=config.seed,
        policy_options=options,
        limits=RunLimits(max_idle_turns=spec.max_idle_turns),
        training_set=train_rows if arm not in UNTRAINED else None,
    )  # fmt: skip
    _play_heldout(config, stages, catalog, eval_key(config, arm, decoding), eval_config)


PROMPTED: Arm = "prompted"
EXAMPLE_FILE = "example.json"


def _example(config: ExperimentConfig, stages: Stages) -> Path:
    """The prompted arm's worked episode (once): of curated's training rows, the shortest
    with at least three assistant turns (a search, a recommendation, the end; else with the
    most there are), its messages
    after the system prompt, in the rows' view: ``arms/prompted/example.json``."""
    folder = stages.arm(PROMPTED)
    path = folder / EXAMPLE_FILE

    def work() -> None:
        rows = load_sft(train_data(config, stages, "curated"))["train"]

        def turns(row: dict[str, Any]) -> int:
            return sum(1 for m in row["messages"] if m["role"] == "assistant")

        most = max(turns(r) for r in rows)
        fit = [r for r in rows if turns(r) >= min(3, most)]
        row = min(fit, key=lambda r: (len(json.dumps(r["messages"])), str(r["episode_id"])))
        messages = [{k: v for k, v in m.items() if v is not None}
                    for m in row["messages"] if m["role"] != "system"]  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(messages, indent=1) + "\n", encoding="utf-8")
        stages.log(f"prompted: episode {row['episode_id']} ({turns(row)} turns) as the example")

    stages.run("example prompted", folder, work, keep=True)
    return path


def play_baseline(config: ExperimentConfig, stages: Stages, catalog: Path, policy: str) -> None:
    """The reference policy's episodes of the held-out tasks (once), under the arms' limits
    and episode keys: ``eval/baselines/<policy>/``."""
    spec = config.eval
    eval_config = ModelEvalConfig(
        model=policy, samples=spec.samples, concurrency=spec.concurrency, seed=config.seed,
        policy_options=PolicyOptions(turn_timeout_s=spec.turn_timeout_s),
        limits=RunLimits(max_idle_turns=spec.max_idle_turns),
    )  # fmt: skip
    _play_heldout(config, stages, catalog, baseline_key(policy), eval_config)


def _play_heldout(
    config: ExperimentConfig, stages: Stages, catalog: Path, key: str,
    eval_config: ModelEvalConfig,
) -> None:
    """Play `eval_config`'s policy on the held-out tasks into ``eval/<key>/`` (once), each
    finished episode kept in a journal beside it, so an interrupted run resumes."""
    folder = stages.out / "eval" / key
    spec = config.eval
    tasks = read_tasks(stages.out / "heldout.jsonl").tasks
    journal = folder.with_name(f"{folder.name}.played.jsonl")

    def work() -> None:
        env = ShoppingEnv.open(catalog, EpisodeLimits(max_turns=spec.max_turns))
        earlier = read_journal(journal)
        if earlier:
            stages.log(f"eval {key}: {len(earlier)} episodes played before, kept ({journal})")
        done = [len(earlier)]
        journal.parent.mkdir(parents=True, exist_ok=True)
        with journal.open("a", encoding="utf-8") as keep:
            add = appender(keep)

            def tick(spec_: str, t: Trajectory) -> None:
                add(spec_, t)
                done[0] += 1
                if done[0] % 25 == 0:
                    stages.log(f"eval {key}: {done[0]}/{len(tasks) * spec.samples} episodes")

            report, played, _ = evaluate_model(
                env, tasks, eval_config, tasks_file=str(stages.out / "heldout.jsonl"),
                on_done=tick, played={eval_config.model: earlier},
            )  # fmt: skip
        write_model_eval(folder, report, played)
        journal.unlink()
        release_engines()  # the next stage may train, and the kept keys and values are GBs

    stages.run(f"eval {key}", folder, work)
