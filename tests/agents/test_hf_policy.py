"""The ``hf:PATH`` policy: reading generations, rendering prompts, batching, whole episodes.

The models are tiny Qwen3s built in the test (tests/support/local_model.py): one random, one taught
to end every first turn with a fixed reply, whose 16-token attention window makes a few
seconds of training on prompt tails exact for whole prompts.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.fake_openai import FakeJudgeServer
from support.local_model import tiny_engine, train_to_say

from shopbench.agents.errors import LocalModelError, PolicyOptionsError, PolicySpecError
from shopbench.agents.format.parse import parse_generation
from shopbench.agents.format.render import template_messages
from shopbench.agents.format.views import ObservationView, apply_view, record_view, view_tools
from shopbench.agents.local.config import HFPolicyConfig
from shopbench.agents.local.engine import GenRequest, HFEngine
from shopbench.agents.local.policy import HFPolicy
from shopbench.agents.openai_policy import OpenAIPolicy, OpenAIPolicyConfig
from shopbench.agents.registry import check_spec, make_policy
from shopbench.chat import ChatMessage, FunctionCall, ToolCall
from shopbench.cli import main
from shopbench.env.env import ShoppingEnv
from shopbench.records.trajectory import TerminationReason, Trajectory
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

REPLY = (
    "<think>\nNothing here fits, so I stop.\n</think>\n\n<tool_call>\n"
    '{"name": "terminate", "arguments": {"status": "failure"}}\n</tool_call>'
)


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(catalog=catalog_dir, intents=["product", "shop", "voucher"], n=2, seed=8)
    return build_tasks(cfg).tasks


def _first_turn(env: ShoppingEnv, task: Task) -> tuple[list[ChatMessage], list[dict]]:
    episode = env.new_episode(task)
    messages = [
        ChatMessage(role="system", content=episode.system_prompt),
        ChatMessage(role="user", content=task.query),
    ]
    return messages, episode.tools


@pytest.fixture(scope="module")
def texts(env: ShoppingEnv, tasks: list[Task]) -> list[str]:
    messages, tools = _first_turn(env, tasks[0])
    return [messages[0].content or "", json.dumps(tools), REPLY, *(t.query for t in tasks)]


@pytest.fixture(scope="module")
def random_model(tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> HFEngine:
    return tiny_engine(tmp_path_factory.mktemp("random") / "m", texts, seed=3)


@pytest.fixture(scope="module")
def taught_model(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], env: ShoppingEnv,
    tasks: list[Task],
) -> Path:
    path = tmp_path_factory.mktemp("taught") / "m"
    engine = tiny_engine(path, texts, hidden_size=64, sliding_window=16)
    prompts = [engine.encode(*_first_turn(env, t)) for t in tasks[:4]]
    train_to_say(path, prompts, REPLY, steps=60, context=40)
    return path


# -- reading a generation ------------------------------------------------------------------


def test_reasoning_and_hermes_calls_are_read_into_the_message() -> None:
    m = parse_generation(
        '<think>\nfirst look\n</think>\n\nSearching.\n<tool_call>\n{"name": "find_product", '
        '"arguments": {"q": "blue shirt"}}\n</tool_call>\n<tool_call>{"name": "terminate", '
        '"arguments": {"status": "failure"}}</tool_call>'
    )
    assert m.reasoning_content == "first look" and m.content == "Searching."
    assert [c.function.name for c in m.tool_calls or []] == ["find_product", "terminate"]
    assert json.loads(m.tool_calls[0].function.arguments) == {"q": "blue shirt"}


def test_cut_and_malformed_generations_stay_readable_failures() -> None:
    cut_in_thought = parse_generation("<think>\nI should search for")
    assert cut_in_thought.reasoning_content == "I should search for"
    assert cut_in_thought.tool_calls is None
    # A call whose closing tag the token limit took still runs; a broken one is kept as a
    # call the environment refuses, never dropped.
    whole = parse_generation('<tool_call>\n{"name": "terminate", "arguments": {"status": "x"}}')
    assert whole.tool_calls and whole.tool_calls[0].function.name == "terminate"
    broken = parse_generation('<tool_call>\n{"name": "find_product", "argu')
    assert broken.tool_calls and broken.tool_calls[0].function.name == ""
    assert parse_generation("I think the blue one.").tool_calls is None


def test_a_local_model_and_an_endpoint_read_the_same_text_into_the_same_message(
    taught_model: Path, server: FakeJudgeServer, env: ShoppingEnv, tasks: list[Task]
) -> None:
    # hf: and openai: share one reader: what the local model writes, served as an endpoint's
    # unparsed content, comes back as the very same message.
    messages, tools = _first_turn(env, tasks[0])
    local = HFPolicy(HFPolicyConfig(path=taught_model, max_new_tokens=64))
    prompt = local.engine.encode(messages, tools)
    (written,) = local.engine.generate([GenRequest(prompt, max_new_tokens=64)])
    server.reset("taught")
    server.says["taught"] = written.text
    remote = OpenAIPolicy(OpenAIPolicyConfig(model="taught", base_url=server.url))

    async def both() -> list:
        try:
            return [await local.act(messages, tools), await remote.act(messages, tools)]
        finally:
            await remote.aclose()

    from_weights, from_endpoint = asyncio.run(both())
    assert from_weights == from_endpoint
    assert from_weights.reasoning_content == "Nothing here fits, so I stop."
    assert [c.function.name for c in from_weights.tool_calls or []] == ["terminate"]


# -- the prompt ----------------------------------------------------------------------------


def test_the_prompt_carries_the_tools_and_earlier_calls(
    random_model: HFEngine, env: ShoppingEnv, tasks: list[Task]
) -> None:
    messages, tools = _first_turn(env, tasks[0])
    call = ToolCall(id="c1", function=FunctionCall(name="find_product", arguments='{"q": "tee"}'))
    messages += [
        ChatMessage(role="assistant", reasoning_content="look first", tool_calls=[call]),
        ChatMessage(role="tool", tool_call_id="c1", name="find_product", content="3 results"),
    ]
    text = random_model.tokenizer.decode(random_model.encode(messages, tools))
    assert '"name": "recommend_product"' in text  # the schemas, from Qwen3's template
    assert '<tool_call>\n{"name": "find_product", "arguments": {"q": "tee"}}' in text
    assert "<tool_response>\n3 results\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")
    # A template that knows no tools gets them in the hermes form, in the system message.
    plain = template_messages(messages, tools, native=False)
    assert "<tools>" in plain[0]["content"] and "recommend_product" in plain[0]["content"]
    assert "<think>\nlook first\n</think>" in plain[2]["content"]
    assert '<tool_call>\n{"name": "find_product"' in plain[2]["content"]


class _Recording:
    """An engine that keeps the prompts it is asked to generate from."""

    def __init__(self, engine: HFEngine) -> None:
        self.engine = engine
        self.prompts: list[tuple[int, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def generate(self, requests: list[GenRequest]) -> list[Any]:
        self.prompts.extend(r.prompt for r in requests)
        return self.engine.generate(requests)


def test_a_model_reads_the_view_its_directory_records(
    random_model: HFEngine, env: ShoppingEnv, tasks: list[Task], tmp_path: Path
) -> None:
    path = tmp_path / "m"
    shutil.copytree(random_model.path, path)
    view = ObservationView.from_id("compact/h1/brief")
    record_view(path, view)
    spy = _Recording(random_model)
    policy = HFPolicy(HFPolicyConfig(path=path, max_new_tokens=4), engine=spy)  # type: ignore[arg-type]
    assert policy.view == view
    messages, tools = _first_turn(env, tasks[0])
    asyncio.run(policy.act(messages, tools))
    seen = spy.prompts
    assert seen == [random_model.encode(apply_view(messages, view), view_tools(tools, view))]
    assert seen[0] != random_model.encode(messages, tools)
    with pytest.raises(PolicyOptionsError, match="trained on the observation view"):
        HFPolicy(HFPolicyConfig(path=path, view="full"), engine=random_model)


# -- batching ------------------------------------------------------------------------------


def test_batched_greedy_generation_equals_one_at_a_time(
    random_model: HFEngine, env: ShoppingEnv, tasks: list[Task]
) -> None:
    prompts = [random_model.encode(*_first_turn(env, t)) for t in tasks[:4]]
    assert len({len(p) for p in prompts}) > 1  # the batch really is padded
    alone = [random_model.generate([GenRequest(p, max_new_tokens=12)])[0] for p in prompts]
    together = random_model.generate([GenRequest(p, max_new_tokens=12) for p in prompts])
    assert [r.text for r in together] == [r.text for r in alone]
    assert all(r.new_tokens >= 1 for r in together)


def test_the_shared_prefix_cache_changes_no_token(
    random_model: HFEngine, env: ShoppingEnv, tasks: list[Task]
) -> None:
    plain = HFEngine(random_model.path, prefix_cache=False)
    prompts = [random_model.encode(*_first_turn(env, t)) for t in tasks[:3]]
    before = random_model.stats.cached_prompt_tokens
    cached = random_model.generate([GenRequest(p, max_new_tokens=10) for p in prompts])
    served = random_model.stats.cached_prompt_tokens - before
    assert served >= 3 * 500  # the system prompt and the tool schemas, three times
    uncached = plain.generate([GenRequest(p, max_new_tokens=10) for p in prompts])
    assert plain.stats.cached_prompt_tokens == 0
    assert [r.text for r in cached] == [r.text for r in uncached]


def test_kept_keys_and_values_change_no_token_and_prefill_only_what_is_new(
    random_model: HFEngine, env: ShoppingEnv, tasks: list[Task]
) -> None:
    """Three-turn episodes in an append-only view (compact, no window): with the kept keys
    and values every turn after the first reuses its whole earlier prompt, and every
    token of every turn is the one a model without them writes."""
    from shopbench.trajectory.loop import RunLimits, run_episode

    kept = HFEngine(random_model.path, kv_tokens=200_000)
    limits = RunLimits(max_idle_turns=3)

    def play(engine: HFEngine) -> list[Trajectory]:
        policy = HFPolicy(HFPolicyConfig(path=engine.path, max_new_tokens=8, view="compact"),
                          engine=engine)  # fmt: skip

        async def go() -> list[Trajectory]:
            return list(await asyncio.gather(*(
                run_episode(env, t, policy, limits, key=bytes([i + 1]) * 32)
                for i, t in enumerate(tasks[:3])
            )))  # fmt: skip

        return asyncio.run(go())

    plain = HFEngine(random_model.path, prefix_cache=False)
    expected, played = play(plain), play(kept)
    assert [t.messages for t in played] == [t.messages for t in expected]
    assert all(t.turns == 3 for t in played)
    # Turn one reuses the shared system prompt at most; turns two and three their whole
    # earlier prompt and reply: most of the prompt tokens came from the store.
    compact = ObservationView(name="compact")
    prompts = [len(kept.encode(apply_view(t.messages[:i], compact), t.tools))
               for t in played for i, m in enumerate(t.messages) if m.role == "assistant"]
    # Each later turn reuses at least the whole prompt of the turn before it (a reply that
    # re-renders as other tokens than were generated is prefilled again, not more).
    earlier = sum(p for i, p in enumerate(prompts) if i % 3 != 2)
    assert kept.stats.cached_prompt_tokens >= earlier > 0.6 * sum(prompts)
    assert kept.kv_store is not None and 0 < kept.kv_store.tokens <= 200_000
    # Written into room set aside rather than concatenated: the same tokens again.
    buffered = HFEngine(random_model.path, kv_tokens=200_000, buffered=True)
    assert [t.messages for t in play(buffered)] == [t.messages for t in expected]
    assert buffered.stats.cached_prompt_tokens == kept.stats.cached_prompt_tokens


def test_a_buffered_cache_layer_holds_what_concatenation_holds() -> None:
    """Appends past the room set aside, and a layer replaced from outside, both keep the
    exact tensors a concatenating layer would."""
    import torch

    from shopbench.agents.local.buffered_cache import BufferedLayer

    torch.manual_seed(0)
    layer, keys, values = BufferedLayer(capacity=4), [], []
    for n in (3, 1, 1, 2, 5):  # 3 fit, then growth past 4, then past 8
        k, v = torch.randn(2, 3, n, 8), torch.randn(2, 3, n, 8)
        keys.append(k)
        values.append(v)
        got_k, got_v = layer.update(k, v)
        assert torch.equal(got_k, torch.cat(keys, dim=-2))
        assert torch.equal(got_v, torch.cat(values, dim=-2))
    assert layer.get_seq_length() == 12
    layer.keys, layer.values = layer.keys[..., :5, :], layer.values[..., :5, :]  # a crop
    k, v = torch.randn(2, 3, 1, 8), torch.randn(2, 3, 1, 8)
    got_k, _ = layer.update(k, v)
    assert torch.equal(got_k, torch.cat([torch.cat(keys, dim=-2)[..., :5, :], k], dim=-2))


def test_concurrent_turns_share_a_generate_call(
    random_model: HFEngine, env: ShoppingEnv, tasks: list[Task]
) -> None:
    policy = HFPolicy(
        HFPolicyConfig(path=random_model.path, max_new_tokens=6), engine=random_model
    )
    turns = [_first_turn(env, t) for t in tasks[:4]]

    async def play() -> list:
        replies = await asyncio.gather(*(policy.act(m, t) for m, t in turns))
        return [replies, policy.batcher().batch_sizes]

    together, sizes = asyncio.run(play())
    assert sizes == [4]
    alone = [asyncio.run(policy.act(m, t)) for m, t in turns]
    assert together == alone


def test_released_engines_are_let_go_and_loaded_again_when_asked(random_model: HFEngine) -> None:
    import gc
    import weakref

    from shopbench.agents.local.engine import release_engines, shared_engine

    config = HFPolicyConfig(path=random_model.path, max_new_tokens=4, kv_cache_tokens=256)
    first = shared_engine(config)
    assert shared_engine(config) is first  # one per model and settings in a process
    gone = weakref.ref(first)
    del first
    assert release_engines() >= 1
    gc.collect()
    assert gone() is None  # nothing else held it: its weights and kept keys are freed
    again = shared_engine(config)
    assert again.path == random_model.path and release_engines() == 1


def test_sampling_is_seeded_and_independent_of_the_batch(
    random_model: HFEngine, env: ShoppingEnv, tasks: list[Task]
) -> None:
    prompts = [random_model.encode(*_first_turn(env, t)) for t in tasks[:3]]

    def sample(seed: int, batch: list) -> str:
        row = GenRequest(prompts[0], max_new_tokens=12, temperature=1.0, seed=seed)
        return random_model.generate([row, *batch])[0].text

    greedy_neighbours = [GenRequest(p, max_new_tokens=4) for p in prompts[1:]]
    assert sample(5, []) == sample(5, greedy_neighbours)
    assert len({sample(s, []) for s in range(4)}) > 1
    greedy = random_model.generate([GenRequest(prompts[0], max_new_tokens=12)])[0].text
    assert sample(5, []) != greedy


# -- the spec and its errors ---------------------------------------------------------------


def test_model_directories_without_weights_or_template_are_refused(
    random_model: HFEngine, tmp_path: Path
) -> None:
    with pytest.raises(LocalModelError, match="no such model directory"):
        check_spec(f"hf:{tmp_path / 'nowhere'}")
    no_weights = tmp_path / "no_weights"
    shutil.copytree(random_model.path, no_weights)
    for f in no_weights.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(LocalModelError, match="no weights"):
        make_policy(f"hf:{no_weights}")
    no_template = tmp_path / "no_template"
    shutil.copytree(random_model.path, no_template)
    (no_template / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((no_template / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (no_template / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(LocalModelError, match="no chat template"):
        check_spec(f"hf:{no_template}")
    with pytest.raises(LocalModelError, match="needs a model directory"):
        check_spec("hf:")
    with pytest.raises(PolicySpecError, match="hf:PATH"):
        check_spec("nonsense")


# -- whole episodes ------------------------------------------------------------------------


def test_an_episode_runs_through_shopbench_eval(
    taught_model: Path, catalog_dir: Path, tasks: list[Task], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks)
    out = tmp_path / "run"
    main([
        "eval", "--catalog", str(catalog_dir), "--tasks", str(task_file),
        "--policy", f"hf:{taught_model}", "--out", str(out), "--quiet",
    ])  # fmt: skip
    assert f"hf:{taught_model}: ASR 0.000" in capsys.readouterr().out
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    trajectories = [Trajectory.model_validate_json(x) for x in lines]
    assert len(trajectories) == len(tasks)  # two of them never seen in training
    for t in trajectories:
        assert t.termination is TerminationReason.terminated and t.turns == 1
        assert t.agent == f"hf:{taught_model}"
        reply = t.messages[2]
        assert reply.reasoning_content == "Nothing here fits, so I stop."
        assert [c.function.name for c in reply.tool_calls or []] == ["terminate"]
        assert t.tool_log[0].error is None and not t.failures


def test_a_bad_model_path_is_one_line_from_the_cli(
    catalog_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main([
            "eval", "--catalog", str(catalog_dir), "--tasks", str(tmp_path / "t.jsonl"),
            "--policy", f"hf:{tmp_path / 'none'}", "--out", str(tmp_path / "o"),
        ])  # fmt: skip
    assert e.value.code == 2
    assert "no such model directory" in capsys.readouterr().err


def test_distill_eval_tables_the_model_against_a_baseline(
    taught_model: Path, catalog_dir: Path, tasks: list[Task], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks)
    out = tmp_path / "table"
    main([
        "distill", "eval", "--model", f"hf:{taught_model}", "--baseline", "careful",
        "--tasks", str(task_file), "--catalog", str(catalog_dir), "--out", str(out),
        "--quiet", "--resamples", "200", "--max-tokens", "64",
    ])  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    model = report["model"]["overall"]["metrics"]
    # The taught model always ends at once, recommending nothing: every call accepted, never
    # a completed task (a terminate without a recommendation is not one), never successful.
    assert model["asr"]["value"] == 0.0
    assert model["completion"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert model["accepted_calls"]["value"] == 1.0
    assert model["shown_ids"] is None  # it named no id
    baseline = report["baseline"]["overall"]["metrics"]
    diff = report["difference"]["overall"]["asr"]
    assert diff["value"] == pytest.approx(-baseline["asr"]["value"]) and diff["high"] <= 0
    assert "live" in capsys.readouterr().err  # these tasks are not held out, and it says so


def test_the_bench_reports_batched_and_unbatched_rates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["bench", "hf-policy", "--batch", "2", "--new-tokens", "3"])
    result = json.loads(capsys.readouterr().out)
    (tiny,) = result["models"]
    assert tiny["model"] == "tiny-qwen3" and tiny["turns"] == 2
    assert tiny["unbatched_tokens_per_s"] > 0 and tiny["batched_tokens_per_s"] > 0
    assert tiny["same_greedy_text"] == 2
    assert any("SmolLM2" in s for s in result["skipped"])


def test_the_episodes_bench_plays_each_view_with_and_without_kept_keys(
    random_model: HFEngine, catalog_dir: Path, tasks: list[Task], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks)
    main(["bench", "hf-episodes", "--model", str(random_model.path), "--catalog",
          str(catalog_dir), "--tasks", str(task_file), "--episodes", "2", "--max-turns", "3",
          "--max-tokens", "6", "--max-idle-turns", "3", "--view", "compact/h1",
          "--view", "compact", "--json"])  # fmt: skip
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    figures = {(f["view"], f["kept"]): f for f in result["figures"]}
    assert set(figures) == {("compact/h1", False), ("compact/h1", True),
                            ("compact", False), ("compact", True)}  # fmt: skip
    for view in ("compact/h1", "compact"):
        assert figures[(view, True)]["same_as_not_kept"] is True
        assert figures[(view, True)]["reused_tokens"] > figures[(view, False)]["reused_tokens"]
    # (A random model calls no tool, so nothing is there for the window to rewrite: the
    # views differ on a tuned model's episodes, measured in docs/distill.md.)
    assert figures[("compact", True)]["reused_tokens"] > 0.8 * figures[("compact", True)][
        "prompt_tokens"
    ]


def test_the_engines_bench_compares_each_setting_with_the_first(
    random_model: HFEngine, catalog_dir: Path, tasks: list[Task], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """float32 at one thread against two plays the same episodes; int8 is measured and
    compared, never assumed equal; a malformed setting is one clear line."""
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks)
    args = ["bench", "hf-engines", "--model", str(random_model.path), "--catalog",
            str(catalog_dir), "--tasks", str(task_file), "--episodes", "2", "--max-turns", "2",
            "--max-tokens", "6", "--concurrency", "2"]  # fmt: skip
    main([*args, "--setting", "float32:1", "--setting", "float32:2", "--setting", "int8:1",
          "--setting", "float32:1:buffered", "--json"])  # fmt: skip
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    figures = {f["setting"]: f for f in result["figures"]}
    assert result["reference"] == "float32:1"
    assert list(figures) == ["float32:1", "float32:2", "int8:1", "float32:1:buffered"]
    assert figures["float32:1"]["same_as_reference"] is True
    assert figures["float32:2"]["same_episodes"] == 2 and figures["float32:2"]["new_tokens"] > 0
    assert figures["float32:1:buffered"]["same_as_reference"] is True
    int8 = figures["int8:1"]
    assert int8["episodes"] == 2 and int8["new_tokens"] > 0
    assert int8["same_as_reference"] == (int8["first_difference"] is None)
    assert int8["same_as_reference"] == (int8["same_episodes"] == 2)
    with pytest.raises(SystemExit):
        main([*args, "--setting", "int4:1"])
    assert "give DTYPE:THREADS" in capsys.readouterr().err


def test_int8_weights_quantize_every_linear_layer(random_model: HFEngine) -> None:
    import torch

    engine = HFEngine(random_model.path, dtype="int8")
    dynamic = torch.ao.nn.quantized.dynamic.Linear
    quantized = [m for m in engine.model.modules() if isinstance(m, dynamic)]
    assert quantized and all(m.weight().dtype == torch.qint8 for m in quantized)
    assert not any(type(m) is torch.nn.Linear for m in engine.model.modules())
    (out,) = engine.generate([GenRequest((1, 2, 3), max_new_tokens=3)])
    assert out.new_tokens >= 1


def test_a_miner_and_the_arena_take_a_local_model(random_model: HFEngine) -> None:
    from shopbench.arena.config import ArenaConfig
    from template.base.config import miner_config
    from template.base.miner import make_agent

    spec = f"hf:{random_model.path}"
    cfg = miner_config(["--netuid", "1", "--agent.policy", spec], env={})
    policy, card = make_agent(cfg.agent)
    assert isinstance(policy, HFPolicy) and card.model == random_model.path.name  # no path
    assert policy.config.max_new_tokens == HFPolicyConfig.model_fields["max_new_tokens"].default
    cfg = miner_config(
        ["--netuid", "1", "--agent.policy", spec, "--agent.max_tokens", "48"], env={}
    )
    assert make_agent(cfg.agent)[0].config.max_new_tokens == 48
    assert ArenaConfig(policies=["careful", spec]).policies == ["careful", spec]
    with pytest.raises(LocalModelError, match="no such model directory"):
        ArenaConfig(policies=["hf:/nowhere"])


def test_the_cli_and_non_hf_policies_never_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from shopbench.cli import main\n"
        "from shopbench.agents.registry import check_spec, make_policy\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "make_policy('careful')\n"
        "try:\n    check_spec('hf:/nowhere')\nexcept Exception as e:\n    print(e)\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "[]"
