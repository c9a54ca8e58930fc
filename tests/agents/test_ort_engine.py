"""The onnxruntime-genai engine of ``hf:`` policies against the transformers engine: the same
tokens for the same prompts, greedy, constrained and sampled, on a tiny random Qwen3 built and
exported in the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.local_model import tiny_engine

from shopbench.agents.errors import LocalModelError
from shopbench.agents.local.config import HFPolicyConfig
from shopbench.agents.local.engine import HFEngine, shared_engine
from shopbench.agents.local.grammar import reply_grammar
from shopbench.agents.local.ort_engine import ORTEngine
from shopbench.agents.local.policy import HFPolicy
from shopbench.agents.local.request import GenRequest
from shopbench.agents.options import PolicyOptions
from shopbench.agents.registry import make_policy
from shopbench.chat import ChatMessage
from shopbench.cli import main
from shopbench.env.env import ShoppingEnv
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task

pytestmark = pytest.mark.slow  # builds, exports and plays a model


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    return build_tasks(BuildConfig(catalog=catalog_dir, intents=["product"], n=3, seed=4)).tasks


def _opening(env: ShoppingEnv, task: Task) -> tuple[list[ChatMessage], list[dict]]:
    episode = env.new_episode(task)
    return [ChatMessage(role="system", content=episode.system_prompt),
            ChatMessage(role="user", content=task.query)], episode.tools  # fmt: skip


@pytest.fixture(scope="module")
def engines(
    tmp_path_factory: pytest.TempPathFactory, env: ShoppingEnv, tasks: list[Task]
) -> tuple[HFEngine, ORTEngine]:
    """A random tiny model, loaded with transformers and exported with the CLI command."""
    messages, tools = _opening(env, tasks[0])
    texts = [messages[0].content or "", json.dumps(tools), *(t.query for t in tasks)]
    # onnxruntime's grouped-query attention wants heads of a multiple of 16 wide.
    hf = tiny_engine(tmp_path_factory.mktemp("ort") / "m", texts, heads=2, seed=5)
    main(["distill", "export-onnx", "--model", str(hf.path)])
    assert (hf.path / "onnx" / "genai_config.json").is_file()
    return hf, ORTEngine(hf.path, threads=1)


def _prompts(engine: HFEngine, env: ShoppingEnv, tasks: list[Task]) -> list[tuple[int, ...]]:
    prompts = [engine.encode(*_opening(env, t)) for t in tasks]
    prompts.append(prompts[0][: len(prompts[0]) // 2])  # a much shorter row in the batch
    assert len({len(p) for p in prompts}) > 1
    return prompts


def test_greedy_tokens_equal_the_transformers_engines(
    engines: tuple[HFEngine, ORTEngine], env: ShoppingEnv, tasks: list[Task]
) -> None:
    """Batched rows of different lengths, and each row alone, write what transformers writes."""
    hf, ort = engines
    requests = [GenRequest(p, max_new_tokens=24) for p in _prompts(hf, env, tasks)]
    expected = hf.generate(requests)
    assert ort.generate(requests) == expected
    assert [ort.generate([r])[0] for r in requests] == expected
    assert all(r.new_tokens > 0 for r in expected)
    assert ort.stats.rows == 2 * len(requests) and ort.stats.new_tokens > 0


def test_constrained_and_sampled_rows_equal_the_transformers_engines(
    engines: tuple[HFEngine, ORTEngine], env: ShoppingEnv, tasks: list[Task]
) -> None:
    """A row under a grammar writes a tool call, the same one; a sampled row draws the same
    tokens for its seed; both share a batch with a free greedy row."""
    hf, ort = engines
    messages, tools = _opening(env, tasks[0])
    grammar = reply_grammar(tools, messages, hf.grammar_tokenizer().marker_ids)
    prompts = _prompts(hf, env, tasks)
    requests = [
        GenRequest(prompts[0], max_new_tokens=120, grammar=grammar),
        GenRequest(prompts[1], max_new_tokens=16, temperature=0.9, seed=11),
        GenRequest(prompts[2], max_new_tokens=16),
    ]
    expected = hf.generate(requests)
    got = ort.generate(requests)
    assert got == expected
    assert got[0].text.startswith(("<tool_call>", "<think>")) and "</tool_call>" in got[0].text


def test_the_config_picks_the_engine_and_names_a_missing_export(
    engines: tuple[HFEngine, ORTEngine], tmp_path: Path
) -> None:
    hf, _ = engines
    chosen = shared_engine(HFPolicyConfig(path=hf.path, engine="onnxruntime-genai", threads=1))
    assert isinstance(chosen, ORTEngine) and chosen.onnx_dir == hf.path / "onnx"
    assert isinstance(shared_engine(HFPolicyConfig(path=hf.path)), HFEngine)
    spec = f"hf:{hf.path}"  # a command's policy options reach it too
    policy = make_policy(spec, **PolicyOptions(engine="onnxruntime-genai").options(spec))
    assert isinstance(policy, HFPolicy) and isinstance(policy.engine, ORTEngine)
    with pytest.raises(LocalModelError, match="distill export-onnx"):
        ORTEngine(hf.path, onnx_dir=tmp_path / "none")


def test_the_engines_bench_compares_onnx_with_transformers(
    engines: tuple[HFEngine, ORTEngine], catalog_dir: Path, tasks: list[Task], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The onnx setting plays the same episodes as float32 transformers, and says so."""
    hf, _ = engines
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks)
    main(["bench", "hf-engines", "--model", str(hf.path), "--catalog", str(catalog_dir),
          "--tasks", str(task_file), "--episodes", "2", "--max-turns", "2", "--max-tokens", "8",
          "--concurrency", "2", "--setting", "float32:1", "--setting", "onnx:1",
          "--json"])  # fmt: skip
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    figures = {f["setting"]: f for f in result["figures"]}
    assert list(figures) == ["float32:1", "onnx:1"]
    assert figures["onnx:1"]["same_as_reference"] is True
    assert figures["onnx:1"]["new_tokens"] == figures["float32:1"]["new_tokens"] > 0
    for f in figures.values():  # where the engine's time went: prefill, processors, the rest
        assert 0 < f["prefill_s"] <= f["engine_s"] and f["mask_s"] == 0  # free: no mask
        assert f["prefill_tokens"] > 0
    # The onnx engine keeps nothing across turns: it runs every prompt position again.
    assert figures["onnx:1"]["prefill_tokens"] > figures["float32:1"]["prefill_tokens"]
    with pytest.raises(SystemExit):
        main(["bench", "hf-engines", "--model", str(hf.path), "--catalog", str(catalog_dir),
              "--tasks", str(task_file), "--setting", "onnx:1:buffered"])  # fmt: skip
    assert "onnx[-int8|-int4]:THREADS" in capsys.readouterr().err


def test_a_quantized_export_plays_beside_float32_with_its_outcomes_compared(
    engines: tuple[HFEngine, ORTEngine], catalog_dir: Path, tasks: list[Task], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``--precision int4`` writes onnx-int4 beside the float32 folder; the bench plays it as
    onnx-int4:THREADS, constrained like every other setting, each episode compared."""
    hf, _ = engines
    main(["distill", "export-onnx", "--model", str(hf.path), "--precision", "int4"])
    assert (hf.path / "onnx-int4" / "genai_config.json").is_file()
    task_file = tmp_path / "tasks.jsonl"
    write_tasks(task_file, tasks)
    main(["bench", "hf-engines", "--model", str(hf.path), "--catalog", str(catalog_dir),
          "--tasks", str(task_file), "--episodes", "2", "--max-turns", "2", "--max-tokens", "24",
          "--concurrency", "2", "--setting", "onnx:1", "--setting", "onnx-int4:1",
          "--decoding", "constrained", "--json"])  # fmt: skip
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    figures = {f["setting"]: f for f in result["figures"]}
    assert list(figures) == ["onnx:1", "onnx-int4:1"]
    assert figures["onnx-int4:1"]["episodes"] == 2 and figures["onnx-int4:1"]["new_tokens"] > 0
    assert isinstance(figures["onnx-int4:1"]["same_as_reference"], bool)
    assert all(f["mask_s"] > 0 for f in figures.values())  # constrained: the grammar's time
    with pytest.raises(SystemExit):
        main(["distill", "export-onnx", "--model", str(hf.path), "--precision", "int2"])
