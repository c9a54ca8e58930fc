"""Every option of a model policy reaches it, from flags and from ``--policy-config``, wherever
a policy is named: ``shopbench eval``, ``distill eval``, ``judge calibrate``, the arena and the
miner. The model is a fake OpenAI-compatible server (tests/support/fake_openai.py) that records each
request body, or a tiny Qwen3 built in the test (tests/support/local_model.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shopbench.agents.options import PolicyOptions, load_policy_options
from shopbench.cli import main
from shopbench.tasks.io import write_tasks

pytestmark = pytest.mark.slow  # trains a model, plays an arena or drives a browser

TERMINATE = '<tool_call>{"name": "terminate", "arguments": {"status": "failure"}}</tool_call>'
FILE_TOML = """\
max_tokens = 100
temperature = 0.3
top_p = 0.5
seed = 11

[template_kwargs]
enable_thinking = false
style = "terse"
"""


@pytest.fixture(scope="module")
def task_file(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(
        catalog=catalog_dir, intents=["product"], n=2, seed=8, split="heldout"
    )
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    write_tasks(path, build_tasks(cfg).tasks)
    return path


@pytest.fixture()
def small(server):  # type: ignore[no-untyped-def]
    """The fake server serving `small`, whose every turn ends the episode."""
    server.reset("small")
    server.says["small"] = TERMINATE
    return server


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_eval_sends_the_file_s_options_with_the_flags_over_them(
    catalog_dir: Path, task_file: Path, tmp_path: Path, small,  # type: ignore[no-untyped-def]
) -> None:
    options = _write(tmp_path / "options.toml", FILE_TOML)
    common = [
        "eval", "--catalog", str(catalog_dir), "--tasks", str(task_file), "--limit", "1",
        "--policy", f"openai:small@{small.url}", "--quiet", "--policy-config", str(options),
    ]  # fmt: skip
    main([*common, "--out", str(tmp_path / "file")])
    body = small.chats("small")[-1]
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (
        100, 0.3, 0.5, 11
    )
    assert body["chat_template_kwargs"] == {"enable_thinking": False, "style": "terse"}

    main([*common, "--out", str(tmp_path / "flags"), "--max-tokens", "64", "--top-p", "0.9",
          "--sampling-seed", "5", "--template-arg", "style=long"])  # fmt: skip
    body = small.chats("small")[-1]
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (
        64, 0.3, 0.9, 5
    )  # the flags win; the rest is still the file's
    assert body["chat_template_kwargs"] == {"enable_thinking": False, "style": "long"}


def test_distill_eval_reads_yaml_and_seeds_each_sample(
    catalog_dir: Path, task_file: Path, tmp_path: Path, small,  # type: ignore[no-untyped-def]
) -> None:
    options = _write(
        tmp_path / "options.yaml",
        "max_tokens: 32\nseed: 40\ntemplate_kwargs:\n  enable_thinking: false\n",
    )
    main([
        "distill", "eval", "--model", f"openai:small@{small.url}", "--baseline", "careful",
        "--tasks", str(task_file), "--catalog", str(catalog_dir), "--out", str(tmp_path / "o"),
        "--samples", "2", "--quiet", "--resamples", "100", "--policy-config", str(options),
        "--temperature", "0.7",
    ])  # fmt: skip
    bodies = small.chats("small")
    assert len(bodies) == 4  # two tasks, two samples, one turn each
    assert {b["max_tokens"] for b in bodies} == {32}
    assert {b["temperature"] for b in bodies} == {0.7}
    assert {b["chat_template_kwargs"]["enable_thinking"] for b in bodies} == {False}
    assert sorted(b["seed"] for b in bodies) == [40, 40, 41, 41]  # sample k: seed + k


def test_the_request_timeout_reaches_an_endpoint_policy(
    catalog_dir: Path, task_file: Path, tmp_path: Path, small,  # type: ignore[no-untyped-def]
) -> None:
    small.slow_s = 1.5
    small.plan("small", "slow")
    options = _write(tmp_path / "options.json", json.dumps({"request_timeout_s": 0.2}))
    try:
        main([
            "eval", "--catalog", str(catalog_dir), "--tasks", str(task_file), "--limit", "1",
            "--policy", f"openai:small@{small.url}", "--quiet", "--out", str(tmp_path / "o"),
            "--policy-config", str(options),
        ])  # fmt: skip
    finally:
        small.slow_s = 2.0
    # The slow first request was given up after 0.2 s and retried; the retry ended the turn.
    assert len(small.chats("small")) == 2
    line = (tmp_path / "o" / "trajectories.jsonl").read_text().splitlines()[0]
    assert json.loads(line)["termination"] == "terminated"


def test_a_bad_file_or_misplaced_options_fail_before_any_work(
    task_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    small,  # type: ignore[no-untyped-def]
) -> None:
    nowhere = tmp_path / "no-catalog"  # never opened: the options fail first
    common = ["--tasks", str(task_file), "--catalog", str(nowhere), "--out", str(tmp_path / "o")]
    bad = _write(tmp_path / "bad.toml", "max_token = 5\ntemperature = 0.2\n")
    for argv in (
        ["eval", "--policy", f"openai:small@{small.url}", *common],
        ["distill", "eval", "--model", f"openai:small@{small.url}", *common],
        ["judge", "calibrate", "--policies", f"careful,narrator,openai:small@{small.url}",
         "--tasks", str(task_file), "--catalog", str(nowhere), "--out", str(tmp_path / "o")],
    ):
        with pytest.raises(SystemExit) as e:
            main([*argv, "--policy-config", str(bad)])
        err = capsys.readouterr().err
        assert e.value.code == 2, err
        assert f"{bad}: unknown key 'max_token' (keys: temperature, top_p, max_tokens" in err
    with pytest.raises(SystemExit) as e:
        main(["eval", "--policy", f"openai:small@{small.url}", *common, "--policy-config",
              str(_write(tmp_path / "v.toml", "top_p = 2\n"))])  # fmt: skip
    assert e.value.code == 2 and "v.toml: top_p: Input should be less than or equal to 1" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit) as e:
        main(["eval", "--policy", "careful", *common, "--max-tokens", "64"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "max_tokens set, but no model policy is named (careful" in err
    with pytest.raises(SystemExit) as e:
        main(["eval", "--policy", "careful", *common, "--request-timeout", "0"])
    assert e.value.code == 2 and "--request-timeout" in capsys.readouterr().err
    assert not small.requests and not nowhere.exists()
    from shopbench.agents.errors import PolicyOptionsError

    with pytest.raises(PolicyOptionsError, match="not a table of keys and values at the top"):
        load_policy_options(_write(tmp_path / "list.yaml", "- max_tokens: 5\n"))
    with pytest.raises(PolicyOptionsError, match="not JSON"):
        load_policy_options(_write(tmp_path / "cut.json", '{"max_tokens": '))
    with pytest.raises(PolicyOptionsError, match="cannot read the policy options"):
        load_policy_options(tmp_path / "none.toml")
    # The loop's turn timeout applies to every policy: a reference policy may take it.
    assert load_policy_options(_write(tmp_path / "t.toml", "turn_timeout_s = 5\n")) == (
        PolicyOptions(turn_timeout_s=5)
    )


def test_calibration_plays_a_model_policy_with_its_options(
    catalog_dir: Path, task_file: Path, tmp_path: Path, small,  # type: ignore[no-untyped-def]
) -> None:
    options = _write(tmp_path / "options.toml", FILE_TOML)
    out = tmp_path / "cal"
    main([
        "judge", "calibrate", "--catalog", str(catalog_dir), "--tasks", str(task_file),
        "--out", str(out), "--policies", f"careful,narrator,openai:small@{small.url}",
        "--injection-sample", "0", "--policy-config", str(options), "--max-tokens", "77",
    ])  # fmt: skip
    bodies = small.chats("small")
    assert len(bodies) == 2  # one turn on each task
    assert {(b["max_tokens"], b["temperature"], b["top_p"]) for b in bodies} == {(77, 0.3, 0.5)}
    assert {b["chat_template_kwargs"]["style"] for b in bodies} == {"terse"}
    report = json.loads((out / "report.json").read_text())
    groups = {p["policy"]: p["group"] for p in report["policies"]}
    assert groups[f"openai:small@{small.url}"] == "other"


def test_the_miner_takes_every_option_by_flag_variable_and_file(
    tmp_path: Path, small,  # type: ignore[no-untyped-def]
) -> None:
    import asyncio

    from shopbench.agents.errors import PolicyOptionsError
    from shopbench.chat import ChatMessage
    from template.base.config import miner_config
    from template.base.miner import make_agent

    options = _write(tmp_path / "options.toml", "request_timeout_s = 30\n" + FILE_TOML)
    agent = ["--netuid", "1", "--agent.base_url", small.url, "--agent.model", "small"]
    cfg = miner_config(
        [*agent, "--agent.policy_config", str(options), "--agent.top_p", "0.8",
         "--agent.template_arg", "style=long"],
        env={"SHOPBENCH_AGENT_MAX_TOKENS": "48"},
    )  # fmt: skip
    policy, _ = make_agent(cfg.agent)  # type: ignore[arg-type]
    assert policy.config.request_timeout_s == 30  # type: ignore[attr-defined]
    asyncio.run(policy.act([ChatMessage(role="user", content="a mug")], []))
    body = small.chats("small")[-1]
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (
        48, 0.3, 0.8, 11
    )
    assert body["chat_template_kwargs"] == {"enable_thinking": False, "style": "long"}
    # Without a file, the model server keeps its own defaults and no seed is sent.
    plain, _ = make_agent(miner_config(agent, env={}).agent)  # type: ignore[arg-type]
    asyncio.run(plain.act([ChatMessage(role="user", content="a mug")], []))
    body = small.chats("small")[-1]
    assert (body["max_tokens"], body["temperature"], "seed" in body) == (8192, 0.6, False)
    assert plain.config.request_timeout_s == 50  # type: ignore[attr-defined]

    reference = miner_config(["--netuid", "1", "--agent.policy", "careful",
                              "--agent.max_tokens", "64"], env={})  # fmt: skip
    with pytest.raises(PolicyOptionsError, match="no model policy is named"):
        make_agent(reference.agent)  # type: ignore[arg-type]
    timed = _write(tmp_path / "turn.toml", "turn_timeout_s = 5\n")
    with pytest.raises(PolicyOptionsError, match="turn_timeout_s is the validators'"):
        make_agent(miner_config([*agent, "--agent.policy_config", str(timed)], env={}).agent)  # type: ignore[arg-type]
    from template.base.options import ConfigError

    with pytest.raises(ConfigError, match="--agent.template_arg"):
        miner_config([*agent, "--agent.template_arg", "nothing"], env={})


def test_the_arena_s_model_miners_play_with_the_options(
    catalog_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shopbench.agents.local.config import HFPolicyConfig
    from shopbench.archive.jsonl import read_trajectories
    from shopbench.distill.tiny_model import TinyModelConfig, tiny_qwen3, train_tiny_tokenizer

    texts = ["find_product view_product_information recommend_product terminate", "a mug"]
    model = tiny_qwen3(tmp_path / "m", TinyModelConfig(), train_tiny_tokenizer(texts))
    options = _write(tmp_path / "options.toml", FILE_TOML)
    out = tmp_path / "arena"
    main([
        "arena", "--catalog", str(catalog_dir), "--seed", "7", "--miners", "2", "--quiet",
        "--policies", f"careful,hf:{model}", "--rounds", "1", "--tasks", "1", "--out", str(out),
        "--policy-config", str(options), "--max-tokens", "3", "--sampling-seed", "100",
    ])  # fmt: skip
    capsys.readouterr()
    logs = {p.name: p.read_text() for p in (out / "logs").glob("miner-uid*.log")}
    said = {
        name: json.loads(line)["options"]
        for name, text in logs.items() for line in text.splitlines()
        if '"model_options"' in line
    }  # fmt: skip
    # The reference miner (uid 2) takes none; the model miner (uid 3) every one, its seed
    # the options' offset by its uid.
    assert said == {"miner-uid3.log": {
        "max_tokens": 3, "temperature": 0.3, "top_p": 0.5, "seed": 103,
        "template_kwargs": {"enable_thinking": False, "style": "terse"},
    }}  # fmt: skip
    played = [t for t in read_trajectories(out / "trajectories.jsonl") if t.miner_uid == 3]
    assert played and HFPolicyConfig.model_fields["max_new_tokens"].default > 3
    from transformers import AutoTokenizer

    # Three tokens a turn at most: no reply is longer than the three longest tokens (a
    # byte-level vocabulary, one character a byte), where 512 would run far past them.
    longest = max(len(t) for t in AutoTokenizer.from_pretrained(str(model)).get_vocab())
    replies = [m for t in played for m in t.messages if m.role == "assistant"]
    assert replies and all(
        len((m.reasoning_content or "") + (m.content or "")) <= 3 * longest for m in replies
    )
