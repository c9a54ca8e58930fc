"""`shopbench distill eval`: the table with intervals, the baseline and its paired
difference, the contamination line, and the bad inputs it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shopbench.cli import main
from shopbench.evaluate.errors import IntervalError
from shopbench.evaluate.intervals import BootstrapConfig, bootstrap, paired_difference
from shopbench.evaluate.metrics import pass_at_k, pass_hat_k
from shopbench.evaluate.trained.table import metric_names, per_task, run_table
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.io import write_tasks
from shopbench.tasks.model import Task


@pytest.fixture(scope="module")
def heldout(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    cfg = BuildConfig(
        catalog=catalog_dir, intents=["product", "shop", "voucher"], n=3, seed=8,
        split="heldout",
    )  # fmt: skip
    path = tmp_path_factory.mktemp("heldout") / "heldout.jsonl"
    write_tasks(path, build_tasks(cfg).tasks)
    return path


def _tasks(path: Path) -> list[Task]:
    return [Task.model_validate_json(x) for x in path.read_text().splitlines()]


# -- intervals -----------------------------------------------------------------------------


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate() -> None:
    num, den = [1, 0, 2, 1, 0, 2, 2, 1], [2] * 8
    a = bootstrap(num, den, BootstrapConfig(seed=3))
    assert a == bootstrap(num, den, BootstrapConfig(seed=3))
    spread = [0.11, 0.93, 0.42, 0.07, 0.68, 0.35, 0.81, 0.24]
    assert bootstrap(spread, [1] * 8, BootstrapConfig(seed=3)) != bootstrap(
        spread, [1] * 8, BootstrapConfig(seed=4)
    )
    assert a.value == pytest.approx(9 / 16) and a.low < a.value < a.high
    assert a.low >= 0.0 and a.high <= 1.0
    same = bootstrap([1] * 5, [1] * 5)
    assert (same.value, same.low, same.high) == (1.0, 1.0, 1.0)
    # Paired: a run against itself differs by exactly nothing; a run that is better on every
    # task it can be has an interval above zero though the two runs' own intervals overlap.
    zero = paired_difference((num, den), (num, den))
    assert (zero.value, zero.low, zero.high) == (0.0, 0.0, 0.0)
    better = [min(2, x + 1) for x in num]
    d = paired_difference((better, den), (num, den))
    assert d.value == pytest.approx(5 / 16) and d.low > 0
    assert bootstrap(better, den).low < bootstrap(num, den).high
    with pytest.raises(IntervalError, match="no tasks"):
        bootstrap([], [])
    with pytest.raises(IntervalError, match="same tasks"):
        paired_difference(([1], [1]), ([1, 0], [1, 1]))


# -- the command ---------------------------------------------------------------------------


def test_distill_eval_writes_the_table_with_the_baseline_and_contamination(
    catalog_dir: Path, heldout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = _tasks(heldout)
    train = tmp_path / "train.jsonl"  # one evaluation query leaked into the training rows
    rows = [
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": q}]}
        for q in ("a blue cotton shirt for the office under 300 pesos", tasks[0].query)
    ]
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    main([
        "distill", "eval", "--model", "careful", "--baseline", "greedy", "--samples", "2",
        "--tasks", str(heldout), "--catalog", str(catalog_dir), "--out", str(out),
        "--train", str(train), "--quiet", "--resamples", "500",
    ])  # fmt: skip
    said = capsys.readouterr()
    assert "careful: ASR" in said.out and "minus greedy's: " in said.out
    assert "1 of 9 evaluation queries overlap" in said.err

    report = json.loads((out / "report.json").read_text())
    overall = report["model"]["overall"]
    assert overall["tasks"] == 9 and overall["episodes"] == 18
    assert set(overall["metrics"]) == set(metric_names(2))
    assert set(report["model"]["by_intent"]) == {"product", "shop", "voucher"}
    for m in overall["metrics"].values():
        assert m["low"] <= m["value"] <= m["high"]

    # Every figure is the estimator over the trajectories the run wrote.
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    ts = [Trajectory.model_validate_json(x) for x in lines]
    by_task: dict[str, list[bool]] = {}
    for t in ts:
        by_task.setdefault(t.task_id, []).append(t.success)
    at2 = sum(pass_at_k(2, sum(v), 2) for v in by_task.values()) / 9
    hat2 = sum(pass_hat_k(2, sum(v), 2) for v in by_task.values()) / 9
    assert overall["metrics"]["pass@2"]["value"] == pytest.approx(at2)
    assert overall["metrics"]["pass^2"]["value"] == pytest.approx(hat2)
    assert overall["metrics"]["asr"]["value"] == pytest.approx(sum(t.success for t in ts) / 18)
    assert overall["metrics"]["completion"]["value"] == 1.0  # careful always terminates

    base = report["baseline"]["overall"]["metrics"]
    diff = report["difference"]["overall"]
    for m in ("asr", "pass@1", "completion"):
        assert diff[m]["value"] == pytest.approx(overall["metrics"][m]["value"] - base[m]["value"])
    assert report["contamination"]["overlapping"] == 1
    assert report["contamination"]["examples"] == [tasks[0].id]
    assert (out / "baseline_trajectories.jsonl").is_file()

    md = (out / "report.md").read_text()
    assert "| metric | model | baseline | difference |" in md
    assert f"| asr | {overall['metrics']['asr']['value']:.3f} [" in md
    assert "## voucher" in md and "1 of 9 evaluation queries overlap" in md


def test_an_interrupted_distill_eval_resumes_from_its_journal(
    catalog_dir: Path, heldout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import shopbench.evaluate.trained.run as run_module
    from shopbench.evaluate.trained.journal import JOURNAL, KEY

    out = tmp_path / "run"
    args = ["distill", "eval", "--model", "careful", "--baseline", "greedy", "--tasks",
            str(heldout), "--catalog", str(catalog_dir), "--out", str(out), "--limit", "5",
            "--quiet", "--resamples", "200", "--concurrency", "1"]  # fmt: skip
    real = run_module.evaluate_model

    class Stop(Exception):
        pass

    def interrupted(*a, on_done, **k):  # type: ignore[no-untyped-def]
        seen = []

        def done(spec: str, t: Trajectory) -> None:
            on_done(spec, t)
            seen.append(t)
            if len(seen) == 7:  # the model's five, then two of the baseline's
                raise Stop

        return real(*a, on_done=done, **k)

    monkeypatch.setattr(run_module, "evaluate_model", interrupted)
    with pytest.raises(Stop):
        main(args)
    journal = [Trajectory.model_validate_json(x) for x in (out / JOURNAL).read_text().splitlines()]
    assert [t.agent for t in journal] == ["careful"] * 5 + ["greedy"] * 2
    monkeypatch.setattr(run_module, "evaluate_model", real)
    with pytest.raises(SystemExit):
        main([*args, "--max-turns", "3"])  # other limits: not this journal's run
    assert "holds the journal of another evaluation (differs in: max_turns)" in (
        capsys.readouterr().err)  # fmt: skip

    main(args)
    assert "resuming: 7 episodes played before" in capsys.readouterr().err

    def read(name: str) -> list[Trajectory]:
        return [Trajectory.model_validate_json(x) for x in (out / name).read_text().splitlines()]

    ts, base = read("trajectories.jsonl"), read("baseline_trajectories.jsonl")
    assert ts == journal[:5] and base[:2] == journal[5:]  # kept, not played again
    assert len(base) == 5
    assert not (out / JOURNAL).exists() and not (out / KEY).exists()  # finished: gone
    # A run that stopped before its first episode leaves nothing to keep: other options go on.
    (out / JOURNAL).write_text("")
    (out / KEY).write_text('{"model": "another"}')
    main([*args, "--max-turns", "3"])
    assert not (out / JOURNAL).exists()


def test_accepted_calls_shown_ids_and_completion_count_what_was_done(env, heldout: Path) -> None:  # type: ignore[no-untyped-def]
    from shopbench.agents.registry import make_policy
    from shopbench.evaluate.runner import run_evaluation
    from shopbench.records.trajectory import TerminationReason, ToolLogEntry

    def entry(turn: int, error: str | None, **arguments: str) -> ToolLogEntry:
        return ToolLogEntry(
            turn=turn, name="x", arguments=arguments, result_digest="d", error=error,
            latency_ms=0,
        )  # fmt: skip

    played = run_evaluation(env, _tasks(heldout)[:1], lambda k: make_policy("greedy"))[0][0]
    t = played.model_copy(update={
        "turns": 3, "termination": TerminationReason.turn_limit,
        "tool_log": [entry(1, None, product_ids="a1"), entry(1, "bad_argument"),
                     entry(2, "invalid_id", product_ids="12345")],
    })  # fmt: skip
    _, ratios = per_task([t], 1)
    assert ratios["accepted_calls"] == ([1], [3])  # an invented id is a refused call
    assert ratios["shown_ids"] == ([1], [2])  # of the two calls naming ids, one invented
    assert ratios["completion"] == ([0], [1])
    # A terminate with nothing recommended is not a completed task; with one, it is.
    ended = t.model_copy(update={"termination": TerminationReason.terminated})
    assert per_task([ended.model_copy(update={"recommended": []})], 1)[1]["completion"] == (
        [0], [1])  # fmt: skip
    assert per_task([ended.model_copy(update={"recommended": ["a1"]})], 1)[1]["completion"] == (
        [1], [1])  # fmt: skip
    silent = run_table(
        [t.model_copy(update={"tool_log": []})], policy="x", samples=1,
        boot=BootstrapConfig(resamples=100),
    )
    assert silent.overall.metrics["accepted_calls"] is None  # no call: undefined, not 0
    assert silent.overall.metrics["shown_ids"] is None


BAG = "A backpack under 500 pesos, with cash on delivery?"
PLAIN = "Need to order heavy duty adjustable dumbbells."


@pytest.mark.parametrize(
    ("query", "arguments", "read"),
    [
        (BAG, {"price": "0-500", "service": "COD"}, True),
        (BAG, {"price": "-500", "service": "COD"}, True),  # the same bound
        (BAG, {"price": "500-", "service": "COD"}, False),  # upper written as lower
        (BAG, {"price": "-500"}, False),  # a service left out
        (PLAIN, {}, True),
        (PLAIN, {"price": "100-101"}, False),  # a price never asked for
        (PLAIN, {"service": "default"}, True),
        (PLAIN, {"price": "9-1"}, False),  # not a range the search reads
        (PLAIN, {"price": 120}, False),  # what a miner wrote, whatever its type
        (PLAIN, {"price": "9" * 5000 + "-"}, False),
        (PLAIN, {"service": ["COD"]}, False),
        (PLAIN, {"price": {"lo": 1}}, False),
    ],
)  # fmt: skip
def test_filters_read_compares_the_first_search_with_the_request(  # type: ignore[no-untyped-def]
    env, heldout: Path, query: str, arguments: dict, read: bool
) -> None:
    from shopbench.agents.registry import make_policy
    from shopbench.evaluate.runner import run_evaluation
    from shopbench.evaluate.trained.reading import filters_read
    from shopbench.records.trajectory import ToolLogEntry

    played = run_evaluation(env, _tasks(heldout)[:1], lambda k: make_policy("greedy"))[0][0]
    first = ToolLogEntry(turn=1, name="find_product", arguments={"q": "x", "page": 1, **arguments},
                         result_digest="d", error=None, latency_ms=0)  # fmt: skip
    later = first.model_copy(update={"turn": 2, "arguments": {"q": "x", "page": 2}})
    t = played.model_copy(update={"query": query, "intent": "product", "tool_log": [first, later]})
    assert filters_read(t) is read
    assert per_task([t], 1)[1]["filters_read"] == ([int(read)], [1])
    assert filters_read(t.model_copy(update={"tool_log": []})) is None  # no search: undefined
    assert filters_read(t.model_copy(update={"intent": "shop"})) is None  # several items


def test_bad_inputs_are_named(
    catalog_dir: Path, heldout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    server,  # type: ignore[no-untyped-def]
) -> None:
    common = ["--tasks", str(heldout), "--catalog", str(catalog_dir), "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as e:
        main(["distill", "eval", "--model", "careful", "--samples", "0", *common])
    assert e.value.code == 2 and "--samples" in capsys.readouterr().err
    server.reset("Qwen/Qwen3-4B")
    with pytest.raises(SystemExit) as e:
        main(["distill", "eval", "--model", f"openai:tuned@{server.url}", *common])
    assert e.value.code == 2
    assert "serves Qwen/Qwen3-4B, not 'tuned'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["distill", "eval", "--model", f"hf:{tmp_path / 'none'}", *common])
    assert "no such model directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main([
            "distill", "eval", "--model", "careful", *common, "--template-arg", "nothing",
        ])  # fmt: skip
    assert "is not KEY=VALUE" in capsys.readouterr().err


def test_live_tasks_are_warned_about(
    catalog_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shopbench.tasks.generate import BuildConfig, build_tasks

    live = tmp_path / "live.jsonl"
    cfg = BuildConfig(catalog=catalog_dir, intents=["product"], n=2, seed=8)
    write_tasks(live, build_tasks(cfg).tasks)
    main([
        "distill", "eval", "--model", "careful", "--tasks", str(live), "--catalog",
        str(catalog_dir), "--out", str(tmp_path / "o"), "--quiet", "--resamples", "100",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert "2 of 2 tasks are not heldout: 2 live" in err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["warnings"] and report["splits"] == {"live": 2}
    assert "pass@2" not in report["model"]["overall"]["metrics"]


def test_eval_sends_the_decoding_it_is_given_and_keeps_the_rest(
    catalog_dir: Path, heldout: Path, tmp_path: Path, server,  # type: ignore[no-untyped-def]
) -> None:
    server.reset("small")
    server.says["small"] = '<tool_call>{"name": "terminate", "arguments": {"status": "x"}}'
    common = [
        "eval", "--catalog", str(catalog_dir), "--tasks", str(heldout), "--limit", "1",
        "--policy", f"openai:small@{server.url}", "--quiet",
    ]  # fmt: skip
    main([*common, "--out", str(tmp_path / "a"), "--max-tokens", "64",
          "--template-arg", "enable_thinking=false"])  # fmt: skip
    body = server.requests[-1]
    assert body["max_tokens"] == 64 and body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["temperature"] == 0.6  # not given: the policy's own default
    main([*common, "--out", str(tmp_path / "b"), "--temperature", "0"])
    assert server.requests[-1]["temperature"] == 0 and server.requests[-1]["max_tokens"] == 8192
    server.reset("large")
    with pytest.raises(SystemExit) as e:
        main([*common, "--out", str(tmp_path / "c")])
    assert e.value.code == 2 and not server.requests  # refused before any episode


def test_a_distill_build_folder_is_a_training_set_its_build_json_left_aside(
    tmp_path: Path,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from shopbench.evaluate.trained.overlap import training_queries

    rows = [json.dumps([{"role": "system", "content": "s"}, {"role": "user", "content": q}])
            for q in ("a red kettle", "two phone cases from one shop")]  # fmt: skip
    pq.write_table(pa.table({"messages": rows}), tmp_path / "train.parquet")
    (tmp_path / "build.json").write_text('{"rows": 2}')
    assert training_queries(tmp_path) == ["a red kettle", "two phone cases from one shop"]


def test_max_turns_bounds_every_episode_and_the_report_says_so(
    catalog_dir: Path, heldout: Path, tmp_path: Path
) -> None:
    out = tmp_path / "short"
    main([
        "distill", "eval", "--model", "careful", "--tasks", str(heldout), "--catalog",
        str(catalog_dir), "--out", str(out), "--quiet", "--resamples", "200", "--max-turns", "2",
    ])  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    assert report["max_turns"] == 2 and report["max_idle_turns"] is None
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    ts = [Trajectory.model_validate_json(x) for x in lines]
    assert ts and all(t.turns <= 2 for t in ts)
    ended = {t.termination.value for t in ts}
    assert "turn_limit" in ended and ended <= {"turn_limit", "terminated"}  # careful needs more
    assert report["model"]["overall"]["metrics"]["completion"]["value"] < 1.0
    assert "; at most 2 turns an episode." in (out / "report.md").read_text()


def test_a_resumed_evaluation_counts_what_it_kept_apart_from_its_seconds(
    catalog_dir: Path, heldout: Path
) -> None:
    from shopbench.chat import EpisodeLimits
    from shopbench.env.env import ShoppingEnv
    from shopbench.evaluate.trained.run import ModelEvalConfig, evaluate_model

    env = ShoppingEnv.open(catalog_dir, EpisodeLimits(max_turns=6))
    tasks = _tasks(heldout)
    config = ModelEvalConfig(model="greedy", concurrency=2)
    first, played, _ = evaluate_model(env, tasks, config)
    assert first.resumed == {} and len(played) == 9
    finished: list[str] = []
    again, replayed, _ = evaluate_model(
        env, tasks, config, played={"greedy": played[:4]},
        on_done=lambda _spec, t: finished.append(t.episode_id),
    )  # fmt: skip
    # four kept from the interrupted run, five played and timed now
    assert again.resumed == {"greedy": 4} and len(finished) == 5
    assert [t.episode_id for t in replayed] == [t.episode_id for t in played]
