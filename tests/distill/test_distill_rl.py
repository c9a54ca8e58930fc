"""GRPO in the arena's environment: ShopbenchEnvironment as TRL drives it (tools by keyword,
rewards from the environments), and `shopbench distill rl` on a tiny Qwen3 on the CPU — two
real TRL GRPO steps whose tool results are masked from the loss; bad input refused first."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from support.local_model import tiny_engine, train_to_say

from shopbench.catalog.schema import Product
from shopbench.chat import ChatMessage, FunctionCall, ToolCall
from shopbench.cli import main
from shopbench.distill.rl.environment import (
    KnowledgeEnvironment,
    ShopbenchEnvironment,
    shared_env,
)
from shopbench.distill.rl.rewards import judge_reward, outcome_reward, viewed_slots_reward
from shopbench.distill.rl.rows import build_rows
from shopbench.distill.rl.trainer import REPORT, ROLLOUTS
from shopbench.env.env import ShoppingEnv
from shopbench.judging.registry import make_judge
from shopbench.outcome.spec import Slot
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task
from shopbench.tasks.split import SplitRule

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

SEARCH = "power strip"
REPLY = (
    '<tool_call>\n{"name": "find_product", "arguments": {"q": "' + SEARCH + '", "page": 1}}'
    "\n</tool_call>"
)
FAST = """\
num_generations: 2
per_device_train_batch_size: 2
gradient_accumulation_steps: 1
max_steps: 2
learning_rate: 1.0e-3
max_completion_length: 4096
max_tool_calling_iterations: 2
mask_truncated_completions: false
rollouts_logged: 2
"""


def _products(catalog: Any, *, heldout: bool, n: int) -> list[Product]:
    rule = SplitRule()
    products = next(iter(catalog.iter_products(batch_size=400)))
    return [p for p in products if rule.is_heldout(p.group_key) == heldout][:n]


def _task(p: Product, i: int, split: str = "live") -> Task:
    return Task(
        id=f"rl-{i}", intent="product", query=f"I'm looking for {p.title}.",
        reward=[Slot(product_id=p.product_id, title=[p.title])], cluster=f"c{i}", split=split,
    )  # fmt: skip


@pytest.fixture(scope="module")
def tasks(catalog: Any) -> list[Task]:
    return [_task(p, i) for i, p in enumerate(_products(catalog, heldout=False, n=2))]


@pytest.fixture(scope="module")
def rows(catalog_dir: Path, tasks: list[Task]) -> list[dict[str, Any]]:
    return build_rows(tasks, shared_env(catalog_dir), seed=0)


def _token_of(env: ShopbenchEnvironment, product_id: str) -> str:
    return next(t for t, c in env.episode.token_map().items() if c == product_id)


def _rollout(catalog_dir: Path, row: dict[str, Any], task: Task, recommend: str | None,
             view: bool = False) -> ShopbenchEnvironment:  # fmt: skip
    """One rollout's environment driven as TRL drives it: reset(**row), tools by keyword."""
    env = ShopbenchEnvironment(catalog_dir)
    assert env.reset(**row) == task.query
    hits = json.loads(env.find_product(q=task.reward[0].title[0], page=1))
    target = _token_of(env, task.reward[0].product_id or "")
    other = hits[-1]["product_id"]  # the search's least relevant hit: another product
    if view:
        env.view_product_information(product_ids=target)
    if recommend == "target":
        env.recommend_product(product_ids=target)
    elif recommend == "other":
        env.recommend_product(product_ids=other)
    env.terminate(status="success" if recommend else "failure")
    return env


def test_rewards_come_from_the_grader(
    catalog_dir: Path, rows: list[dict[str, Any]], tasks: list[Task]
) -> None:
    hit = _rollout(catalog_dir, rows[0], tasks[0], "target")
    nothing = _rollout(catalog_dir, rows[0], tasks[0], None)
    viewed_other = _rollout(catalog_dir, rows[0], tasks[0], "other", view=True)
    envs = [hit, nothing, viewed_other]
    outcome = outcome_reward(success_bonus=1.0)(prompts=[], completions=[], environments=envs)
    assert outcome[0] == 2.0 and outcome[1] == 0.0  # full reward: rule 1 + success bonus
    assert outcome[2] == 0.0 and viewed_other.outcome.rule_scores == [0.0]  # a wrong title
    # The dense term reads the validator's own log: the target was opened, not recommended.
    assert viewed_slots_reward()(environments=envs) == [0.0, 0.0, 1.0]


def test_the_judge_term_scores_the_rollout_as_the_archive_would(
    catalog_dir: Path, rows: list[dict[str, Any]], tasks: list[Task]
) -> None:
    task = tasks[0]
    env = ShopbenchEnvironment(catalog_dir)
    env.reset(**rows[0])
    found = env.find_product(q=task.reward[0].title[0], page=1)
    token = _token_of(env, task.reward[0].product_id or "")
    done = env.recommend_product(product_ids=token)
    prompt = [{"role": "system", "content": rows[0]["prompt"][0]["content"]},
              {"role": "user", "content": task.query}]  # fmt: skip
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "find_product", "arguments": {"q": task.reward[0].title[0], "page": 1}}}]},
        {"role": "tool", "name": "find_product", "content": found},
        {"role": "assistant", "content": f"{token} matches every word of the request at the "
         "listed price.", "tool_calls": [{"type": "function", "function": {
             "name": "recommend_product", "arguments": {"product_ids": token}}}]},
        {"role": "tool", "name": "recommend_product", "content": done},
    ]  # fmt: skip
    judge = make_judge("rubric")
    [score] = judge_reward(judge)(prompts=[prompt], completions=[completion], environments=[env])
    [silent] = judge_reward(judge)(
        prompts=[prompt], completions=[[{"role": "assistant", "content": ""}]], environments=[env]
    )
    assert 0.0 <= silent < score <= 1.0


def test_a_group_starts_from_one_state_and_an_instance_pickles_mid_episode(
    catalog_dir: Path, rows: list[dict[str, Any]], tasks: list[Task]
) -> None:
    a, b, other = (ShopbenchEnvironment(catalog_dir) for _ in range(3))
    a.reset(**rows[0])
    b.reset(**rows[0])
    other.reset(**rows[1])
    seen = [e.find_product(q=SEARCH, page=1) for e in (a, b, other)]
    assert seen[0] == seen[1] and seen[0] != seen[2]  # same key, same tokens; another key not
    assert a.env is b.env is shared_env(catalog_dir)  # the catalog opened once per process

    token = json.loads(seen[0])[0]["product_id"]
    a.view_product_information(product_ids=token)
    copy = pickle.loads(pickle.dumps(a))
    assert copy.episode.log[-1].result == a.episode.log[-1].result
    assert copy.recommend_product(product_ids=token) == a.recommend_product(product_ids=token)
    assert copy.outcome == a.outcome


def test_the_tools_are_the_toolkits_with_its_validation(
    catalog_dir: Path, env: ShoppingEnv, rows: list[dict[str, Any]], tasks: list[Task]
) -> None:
    assert ShopbenchEnvironment.schemas() == env.new_episode(tasks[0]).tools
    knowledge = env.tool_specs("knowledge")
    assert KnowledgeEnvironment.tool_names() == list(knowledge)
    assert "web_search" not in ShopbenchEnvironment.tool_names()
    e = ShopbenchEnvironment(catalog_dir)
    e.reset(**rows[0])
    assert e.find_product(q=SEARCH, page=9).startswith("Error: find_product: argument 'page'")
    assert "unknown argument 'colour'" in e.find_product(q=SEARCH, page=1, colour="red")
    assert "not shown in this episode" in e.recommend_product(product_ids="1234567890")


def test_knowledge_tasks_play_in_the_environment_with_web_search(catalog_dir: Path) -> None:
    from shopbench.distill.errors import RLDataError
    from shopbench.tasks.generate import BuildConfig, build_tasks

    built = build_tasks(BuildConfig(catalog=catalog_dir, intents=["knowledge"], n=1, seed=5))
    [row] = build_rows(built.tasks, shared_env(catalog_dir), seed=0)
    assert row["environment"] == "knowledge"
    env = KnowledgeEnvironment(catalog_dir)
    env.reset(**row)
    assert env.web_search(q=built.tasks[0].query[:60]).startswith('[{"url":')
    with pytest.raises(RLDataError, match="plays product, shop, voucher tasks"):
        ShopbenchEnvironment(catalog_dir).reset(**row)


# -- the command ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def taught(tmp_path_factory: pytest.TempPathFactory, catalog_dir: Path, tasks: list[Task],
           rows: list[dict[str, Any]]) -> Path:  # fmt: skip
    """A tiny random Qwen3 (small BPE, Qwen3's template) taught to search on every turn:
    after the query and after a search's results (a windowed model: only the tail counts)."""
    env = shared_env(catalog_dir)
    schemas = ShopbenchEnvironment.schemas()
    path = tmp_path_factory.mktemp("rl-model") / "m"
    texts = [env.system_prompt, json.dumps(schemas), REPLY, *(t.query for t in tasks)]
    engine = tiny_engine(path, texts, hidden_size=64, sliding_window=16)
    call = ToolCall(id="call_1", function=FunctionCall(
        name="find_product", arguments=json.dumps({"q": SEARCH, "page": 1})))  # fmt: skip
    prompts = []
    for task, row in zip(tasks, rows, strict=True):
        replay = ShopbenchEnvironment(catalog_dir)
        replay.reset(**row)
        first = [ChatMessage(role="system", content=env.system_prompt),
                 ChatMessage(role="user", content=task.query)]  # fmt: skip
        then = [ChatMessage(role="assistant", content="", tool_calls=[call]),
                ChatMessage(role="tool", tool_call_id="call_1", name="find_product",
                            content=replay.find_product(q=SEARCH, page=1))]  # fmt: skip
        prompts += [engine.encode(first, schemas), engine.encode(first + then, schemas)]
    train_to_say(path, prompts, REPLY, steps=60, context=40)
    return path


def _rl(*args: str) -> int:
    try:
        main(["distill", "rl", *args])
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_two_grpo_steps_on_the_cpu_mask_the_tool_results(
    taught: Path, catalog_dir: Path, tasks: list[Task], rows: list[dict[str, Any]],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    write_tasks(tmp_path / "live.jsonl", tasks)
    (tmp_path / "grpo.yaml").write_text(FAST)
    out = tmp_path / "run"
    code = _rl("--model", str(taught), "--tasks", str(tmp_path / "live.jsonl"),
               "--catalog", str(catalog_dir), "--config", str(tmp_path / "grpo.yaml"),
               "--out", str(out))  # fmt: skip
    assert code == 0
    assert "2 GRPO steps on cpu" in capsys.readouterr().out
    report = json.loads((out / REPORT).read_text())
    assert report["steps"] == 2 and report["rollouts"] == 4 and report["tasks"] == 2
    assert [s["parts"]["outcome"] for s in report["log"]] == [0.0, 0.0]  # nothing recommended
    assert report["masked_tool_tokens"] > 0 and report["model_tokens"] > 0
    assert (out / "model" / "config.json").is_file()

    rollouts = [json.loads(line) for line in (out / ROLLOUTS).read_text().splitlines()]
    # Each generation is an arena turn: one search in turn 1, one in turn 2, then the cap.
    calls = [{"turn": 1, "name": "find_product", "error": None},
             {"turn": 2, "name": "find_product", "error": None}]  # fmt: skip
    assert len(rollouts) == 4 and all(r["calls"] == calls and r["turns"] == 2 for r in rollouts)
    for r in rollouts:
        # What the search returned in this row's episode (same key, same tokens) is exactly
        # what was kept out of the loss, once per turn; the calls the model wrote stay in it.
        replay = ShopbenchEnvironment(catalog_dir)
        replay.reset(**next(row for row in rows if json.loads(row["task"])["id"] == r["task_id"]))
        observation = replay.find_product(q=SEARCH, page=1)
        assert r["masked_text"].count(observation) == 2 and observation not in r["model_text"]
        assert r["model_text"].startswith(REPLY) and r["model_text"].count(REPLY) >= 2
        assert "find_product" not in r["masked_text"]
        assert r["masked_tokens"] > len(observation) // 8


def test_bad_input_is_one_line_before_training(
    taught: Path, catalog: Any, catalog_dir: Path, tasks: list[Task], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    held_group = _task(_products(catalog, heldout=True, n=1)[0], 9)
    cases = {
        "no task": ('{"prompt": [{"role": "user", "content": "hi"}]}\n', FAST, "without a task"),
        "held-out split": (_task(catalog.get([tasks[0].reward[0].product_id])[0], 8, "heldout")
                           .model_dump_json() + "\n", FAST, "held-out split"),
        "held-out group": (held_group.model_dump_json() + "\n", FAST, "held-out product group"),
        "unknown key": (tasks[0].model_dump_json() + "\n", FAST + "num_rollouts: 3\n",
                        "unknown key 'num_rollouts'"),
    }  # fmt: skip
    for name, (lines, config, said) in cases.items():
        (tmp_path / "t.jsonl").write_text(lines)
        (tmp_path / "c.yaml").write_text(config)
        out = tmp_path / name.replace(" ", "-")
        code = _rl("--model", str(taught), "--tasks", str(tmp_path / "t.jsonl"), "--catalog",
                   str(catalog_dir), "--config", str(tmp_path / "c.yaml"), "--out", str(out))
        err = capsys.readouterr().err.strip()
        assert code == 2, name
        assert said in err and len(err.splitlines()) == 1, (name, err)
        assert not out.exists(), name
    write_tasks(tmp_path / "t.jsonl", tasks)
    code = _rl("--model", str(taught), "--tasks", str(tmp_path / "t.jsonl"), "--catalog",
               str(catalog_dir), "--out", str(tmp_path / "e"), "--eval-tasks", "missing.jsonl")
    assert code == 2 and "missing.jsonl: no such task file" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_the_shipped_config_holds_whole_groups_and_a_lora_run_saves_a_whole_model(
    taught: Path, catalog_dir: Path, tasks: list[Task], tmp_path: Path
) -> None:
    from shopbench.distill.rl.config import load_rl_config
    from shopbench.distill.rl.trainer import train_rl

    shipped = load_rl_config("grpo")
    assert shipped.num_generations == 8 and shipped.loss_type == "dapo"
    assert shipped.per_device_train_batch_size * shipped.gradient_accumulation_steps % 8 == 0
    assert shipped.max_tool_calling_iterations < 30 and shipped.use_vllm == "auto"

    write_tasks(tmp_path / "live.jsonl", tasks[:1])
    (tmp_path / "lora.yaml").write_text(FAST.replace("max_steps: 2", "max_steps: 1")
                                        .replace("iterations: 2", "iterations: 1")
                                        + "lora: true\nlora_r: 4\n")  # fmt: skip
    config = load_rl_config(tmp_path / "lora.yaml")
    report = train_rl(str(taught), tmp_path / "live.jsonl", catalog_dir, tmp_path / "run", config)
    saved = Path(report.model_dir)
    assert report.steps == 1 and (saved / "config.json").is_file()
    assert not (saved / "adapter_config.json").exists()  # merged: hf:OUT/model plays it
