"""The operators' docs run as written: every ``btcli`` line names a command and options the
installed btcli lists, the neurons are started with the project's Python, and the settings
tables list every setting the neurons take."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from shopbench.settings import settings
from template.base.config import MinerConfig, ValidatorConfig

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BTCLI = shutil.which("btcli", path=str(Path(sys.executable).parent)) or shutil.which("btcli")
"""The btcli installed beside the Python running the tests (the project's), else on PATH."""
SEPARATORS = {"|", "||", "&&", ";"}
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


# -- the docs' command lines -------------------------------------------------------------


def _code_lines(markdown: str) -> list[str]:
    """Every line of the fenced code blocks (``\\`` continuations joined), then every
    inline code span of the text around them (a span may wrap over lines)."""
    lines: list[str] = []
    for block in FENCE.findall(markdown):
        lines += block.replace("\\\n", " ").splitlines()
    prose = FENCE.sub("", markdown)
    lines += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
    return lines


def _commands(line: str, program: str) -> list[list[str]]:
    """The arguments of each run of `program` (by its file name) on a shell line: up to the
    next ``|``, ``&&``, ``;`` or the end; a ``$(...)`` is a line of its own."""
    out: list[list[str]] = []
    for part in [*re.findall(r"\$\(([^)]*)\)", line), re.sub(r"\$\([^)]*\)", "X", line)]:
        try:
            tokens = shlex.split(part, comments=True)
        except ValueError:
            continue  # prose with an odd quote: no command
        for i, token in enumerate(tokens):
            if Path(token).name == program:
                rest = tokens[i + 1 :]
                end = next((j for j, t in enumerate(rest) if t in SEPARATORS), len(rest))
                out.append(rest[:end])
    return out


def _btcli_lines() -> list[tuple[str, list[str]]]:
    found = []
    for doc in DOCS:
        for line in _code_lines(doc.read_text()):
            for args in _commands(line, "btcli"):
                if not args:
                    continue  # the program named, not run: "`.venv/bin/btcli`"
                found.append((f"{doc.relative_to(ROOT)}: btcli {' '.join(args)}", args))
    return found


# -- what the installed btcli lists --------------------------------------------------------


@dataclass
class Help:
    """What one ``btcli ... --help`` lists: its subcommands and its options, each option
    with whether it takes a value."""

    commands: set[str] = field(default_factory=set)
    options: dict[str, bool] = field(default_factory=dict)


_OPTION_ROW = re.compile(r"^[*\s]*(-[^<]*?)\s+<([^>|]+)")
_COMMAND_ROW = re.compile(r"^([a-z][a-z0-9-]*)\s")


def parse_help(text: str) -> Help:
    """The rows of rich's boxed panels: a row that starts with a word is a subcommand, one
    that starts with ``-`` (after a required ``*``) an option, its type in ``<...>``."""
    found = Help()
    for raw in text.splitlines():
        if not raw.startswith("│"):
            continue
        row = raw[1:].rstrip().removesuffix("│")[1:]
        if m := _COMMAND_ROW.match(row):
            found.commands.add(m.group(1))
        elif m := _OPTION_ROW.match(row):
            takes_value = m.group(2).strip() != "bool"
            for name in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", m.group(1)):
                found.options[name] = takes_value
    return found


_HELP: dict[tuple[str, ...], Help | None] = {}


def _run_help(path: tuple[str, ...]) -> Help | None:
    assert BTCLI is not None
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}
    run = subprocess.run(
        [BTCLI, *path, "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    return parse_help(run.stdout) if run.returncode == 0 else None


def _fetch(paths: Iterable[tuple[str, ...]]) -> None:
    """The help of each path not asked for yet, run at once (each btcli start takes about
    a second)."""
    missing = sorted(set(paths) - set(_HELP))
    with ThreadPoolExecutor(max_workers=4) as pool:
        _HELP.update(zip(missing, pool.map(_run_help, missing), strict=True))


Walk = Generator[tuple[str, ...], Help | None, list[str]]


def _walk(args: list[str]) -> Walk:
    """Follow `args` down btcli's command tree, asking (yielding) for the help of each
    command reached; the problems found: a command btcli lacks, an option the command it
    is given to does not list, a line that stops at a group."""
    path: tuple[str, ...] = ()
    problems: list[str] = []
    here = yield path
    i = 0
    while i < len(args) and here is not None:
        token = args[i]
        if token.startswith("-"):
            name = token.split("=")[0]
            if name not in here.options:
                where = " ".join(("btcli", *path))
                problems.append(f"{where} has no option {name} (it lists {sorted(here.options)})")
            elif here.options[name] and "=" not in token:
                i += 1  # its value
        elif token in here.commands:
            path = (*path, token)
            here = yield path
            if here is None:
                problems.append(f"btcli {' '.join(path)}: btcli does not know it")
        elif here.commands:
            problems.append(
                f"btcli {' '.join(path)} has no command {token} (it has {sorted(here.commands)})"
            )
            return problems
        i += 1
    if here is not None and here.commands:
        problems.append(f"btcli {' '.join(path)} is a group: name one of {sorted(here.commands)}")
    return problems


def check(lines: list[tuple[str, list[str]]]) -> dict[str, list[str]]:
    """Each line's problems against the installed btcli (its help read level by level, the
    commands of one level at once)."""
    walks: dict[str, tuple[Walk, tuple[str, ...]]] = {}
    problems: dict[str, list[str]] = {}
    for where, args in lines:
        walk = _walk(args)
        walks[where] = (walk, next(walk))
    while walks:
        _fetch(path for _, path in walks.values())
        for where, (walk, path) in list(walks.items()):
            try:
                walks[where] = (walk, walk.send(_HELP[path]))
            except StopIteration as done:
                problems[where] = done.value
                del walks[where]
    return problems


needs_btcli = pytest.mark.skipif(
    BTCLI is None, reason="btcli is not installed (pip install -e '.[subnet]' installs it)"
)


@needs_btcli
def test_every_btcli_line_of_the_docs_runs_with_the_installed_btcli() -> None:
    lines = _btcli_lines()
    docs = {where.split(":")[0] for where, _ in lines}
    assert {"docs/validator.md", "docs/miner.md"} <= docs
    registered = [w for w, args in lines if args[:2] == ["subnets", "register"]]
    assert len(registered) >= 2 and any("stake add" in w for w, _ in lines)
    wrong = {where: p for where, p in check(lines).items() if p}
    assert wrong == {}


@needs_btcli
def test_the_check_refuses_what_this_btcli_does_not_take() -> None:
    bad = [
        ("old flags", ["subnets", "register", "--netuid", "1", "--wallet.name", "w"]),
        ("a typo", ["subnets", "regster", "--netuid", "1"]),
        ("a group", ["stake"]),
        ("a value read as a command", ["--network", "test", "subnets", "list"]),
    ]
    found = check(bad)
    assert found["old flags"] == [
        f"btcli subnets register has no option --wallet.name (it lists "
        f"{sorted(_HELP[('subnets', 'register')].options)})"  # type: ignore[union-attr]
    ]
    assert found["a typo"][0].startswith("btcli subnets has no command regster (it has [")
    assert found["a group"][0].startswith("btcli stake is a group: name one of [")
    assert found["a value read as a command"] == []  # --network takes a value: "test"


def test_the_neurons_are_run_with_the_projects_python() -> None:
    runs = []
    for doc in DOCS:
        for line in _code_lines(doc.read_text()):
            for part in re.split(r"&&|;|\|", line):
                words = part.split()
                for i, word in enumerate(words[1:], start=1):
                    if re.fullmatch(r"neurons/\w+\.py", word) and "python" in words[i - 1]:
                        runs.append((doc.name, words[i - 1], word))
    assert len(runs) >= 4
    assert [r for r in runs if r[1] != ".venv/bin/python"] == []


def _table_flags(markdown: str, heading: str) -> set[str]:
    """The flags in the first column of the table under `heading`."""
    section = markdown.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| `--")]
    return {f for r in rows for f in re.findall(r"`(--[\w.]+)", r.split(" | ")[0])}


@pytest.mark.parametrize(
    ("doc", "flags"),
    [
        ("validator.md", {s.flag for s in settings(ValidatorConfig, frozenset({"consensus"}))}),
        ("miner.md", {s.flag for s in settings(MinerConfig)}),
    ],
)
def test_the_settings_table_lists_every_setting(doc: str, flags: set[str]) -> None:
    listed = _table_flags((ROOT / "docs" / doc).read_text(), "## Settings")
    assert sorted(flags - listed) == [], f"{doc}'s settings table lacks these"
    assert sorted(listed - flags) == [], f"{doc}'s settings table names what is no setting"
    if doc == "validator.md":
        archive = {f for f in flags if "archive" in f}
        assert len(archive) >= 4 and archive <= listed  # where the shards go, and uploads
