"""The model's text format (shopbench/agents/format/): its markers are declared once, and the
token tables that tokenizers are built from agree with Qwen3's vocabulary."""

from __future__ import annotations

import ast
from pathlib import Path

from shopbench.agents.format import markers
from shopbench.agents.format.tokens import CHAT_TOKENS, FORMAT_TOKENS, REPLY_TOKENS
from shopbench.distill.qwen_tokenizer import ADDED_TOKENS

ROOT = Path(__file__).resolve().parents[2]
FORMAT_PACKAGE = ROOT / "shopbench" / "agents" / "format"
MARKERS = [v for k, v in vars(markers).items() if k.isupper() and isinstance(v, str)]


def _prose(tree: ast.Module) -> set[int]:
    """The ids of the strings that are statements of their own: docstrings (of a module, a
    class, a function or an attribute). Prose may name a marker; code may not spell one."""
    return {
        id(node.value) for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }  # fmt: skip


def test_the_markers_are_spelled_only_in_the_format_package() -> None:
    assert len(MARKERS) == 9 and len(set(MARKERS)) == 9
    spelled = []
    for path in sorted((ROOT / "shopbench").rglob("*.py")):
        if FORMAT_PACKAGE in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = _prose(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in prose
            ):
                spelled += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {m}"
                    for m in MARKERS
                    if m in node.value
                ]
    assert not spelled, "markers spelled outside shopbench/agents/format:\n" + "\n".join(spelled)


def test_the_token_tables_are_qwen3s_tokens_in_qwen3s_order() -> None:
    qwen3 = [t for t in ADDED_TOKENS if t[0] in dict(CHAT_TOKENS)]
    assert qwen3 == list(CHAT_TOKENS)
    assert set(REPLY_TOKENS) < set(FORMAT_TOKENS) < {t for t, _ in CHAT_TOKENS}
    assert not any(special for t, special in CHAT_TOKENS if t in FORMAT_TOKENS)
