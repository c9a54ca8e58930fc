"""Shared fixtures: small real catalogs built with the real generator and index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

DATA = Path(__file__).resolve().parent / "data"
"""The small real files the suite reads (see data/README.md for where each comes from)."""


@pytest.fixture(scope="session")
def shoppingbench_data() -> Path:
    """ShoppingBench's product and voucher test files (Apache-2.0, see their NOTICE)."""
    return DATA / "shoppingbench"


@pytest.fixture(scope="session")
def catalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2,000-product catalog from seed 7 (built once per test process)."""
    from shopbench.catalog.store import build_catalog

    out = tmp_path_factory.mktemp("catalog") / "c"
    build_catalog(out, 2000, seed=7, chunk_size=500, workers=1)
    return out


@pytest.fixture(scope="session")
def catalog(catalog_dir: Path):  # type: ignore[no-untyped-def]
    """The opened 2,000-product catalog."""
    from shopbench.catalog.store import Catalog

    return Catalog.open(catalog_dir)


@pytest.fixture(scope="module")
def env(catalog):  # type: ignore[no-untyped-def]
    """A shopping environment over the 2,000-product catalog (one per test module)."""
    from shopbench.env.env import ShoppingEnv

    return ShoppingEnv(catalog)


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    """A fake OpenAI-compatible judge server (tests/support/fake_openai.py) on a loopback port, one
    per test module; each module resets it to the state its tests start from."""
    from support.fake_openai import FakeJudgeServer, running

    with running(FakeJudgeServer()) as s:
        yield s


@pytest.fixture(scope="module")
def s3():  # type: ignore[no-untyped-def]
    """A real S3-compatible server (moto's) on a loopback port, one per test module; its
    endpoint URL."""
    from support.object_store import s3_server

    with s3_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def qwen3_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen3's real tokenizer, rebuilt offline from the qwen.tiktoken dashscope ships."""
    from shopbench.distill.qwen_tokenizer import build_qwen3_tokenizer

    return build_qwen3_tokenizer(tmp_path_factory.mktemp("qwen3") / "tokenizer")
