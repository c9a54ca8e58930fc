"""What an arena run is given: its settings, the miners added by hand, a leaderboard row."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shopbench.agents.local.config import HF_PREFIX
from shopbench.agents.options import PolicyOptions, check_applies
from shopbench.agents.registry import (
    CLARIFY_POLICIES,
    SERVABLE_ADVERSARIES,
    SERVABLE_POLICIES,
    check_spec,
    kinds_in_turn,
)
from shopbench.arena.errors import ArenaError
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.trajectory.loop import DEFAULT_TURN_TIMEOUT_S

DEFAULT_POLICIES: tuple[str, ...] = kinds_in_turn(SERVABLE_POLICIES)
"""The reference policies the miners play, in uid order (cycled past their number): every
one a miner can serve, the kinds taking turns, so even a three-miner arena has an honest,
a careless and a dishonest miner."""


class AddedMiner(BaseModel):
    """A miner the arena does not start: its base URL and its hotkey (``URL=HOTKEY``)."""

    model_config = ConfigDict(frozen=True)

    url: str
    hotkey: str = Field(min_length=40, max_length=60, description="ss58 address")

    @classmethod
    def parse(cls, text: str) -> AddedMiner:
        """Read ``URL=HOTKEY``; ArenaError saying what is wrong."""
        url, sep, hotkey = text.rpartition("=")
        if not sep or not url or not hotkey:
            raise ArenaError(f"--add-miner {text!r}: expected URL=HOTKEY, e.g. "
                             "http://127.0.0.1:8091=5F...")  # fmt: skip
        try:
            return cls(url=url, hotkey=hotkey)
        except ValueError as e:
            raise ArenaError(f"--add-miner {text!r}: {e}") from None

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError("the URL must be http://HOST:PORT")
        return url

    def address(self) -> tuple[str, int]:
        """The (IPv4 address, port) published for it on the arena's chain."""
        parts = urlsplit(self.url)
        assert parts.hostname is not None and parts.port is not None
        try:
            ip = socket.gethostbyname(parts.hostname)
        except OSError as e:
            raise ArenaError(
                f"--add-miner {self.url}: cannot resolve {parts.hostname} ({e})"
            ) from None
        return ip, parts.port


class ArenaConfig(BaseModel):
    """One arena run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    miners: int = Field(default=8, ge=0, le=64, description="reference miners to start")
    rounds: int = Field(default=3, ge=1, le=1000, description="validator rounds")
    products: int = Field(default=50_000, ge=500, description="catalog size (when built)")
    seed: int = Field(default=1, ge=0, description="catalog seed (public: arena only)")
    out: Path = Field(default=Path("arena"), description="output directory")
    catalog: Path | None = Field(
        default=None, description="use this catalog, built from --seed (default: build or "
        "reuse OUT/catalog-PRODUCTS-sSEED)",
    )  # fmt: skip
    policies: list[str] = Field(
        default_factory=lambda: list(DEFAULT_POLICIES), min_length=1,
        description="reference policies or local models (hf:PATH), cycled over the miners",
    )  # fmt: skip
    policy_options: PolicyOptions = Field(
        default_factory=PolicyOptions, description="options of the hf: miners' models "
        "(decoding, template arguments; their seed is offset by each miner's uid); the turn "
        "timeout is turn_timeout_s",
    )  # fmt: skip
    add_miners: list[AddedMiner] = Field(
        default_factory=list, description="miners run elsewhere, joined to the arena"
    )
    tasks_per_round: int = Field(default=8, ge=1, le=256, description="tasks per round")
    concurrency: int = Field(default=32, ge=1, description="episodes played at once")
    turn_timeout_s: float = Field(
        default=DEFAULT_TURN_TIMEOUT_S, gt=0, description="seconds a miner has to answer one "
        "turn (the validators' default, so a miner added with --add-miner meets the deadline "
        "it will meet on the subnet)",
    )  # fmt: skip
    round_timeout_s: float = Field(
        default=300.0, gt=0, description="seconds a round's episodes have: one still running "
        "then is cut (a model miner on a CPU may need more)",
    )  # fmt: skip
    blocks_per_round: int = Field(default=50, ge=1, description="local chain blocks per round")
    netuid: int = Field(default=1, ge=0, description="the local chain's subnet id")
    workers: int = Field(default=2, ge=1, description="catalog build processes")
    force: bool = Field(
        default=False, description="replace what an earlier run left in --out (its archive, "
        "annotations included, its trajectories and the validator's state); without it such "
        "a folder is refused and nothing is touched",
    )  # fmt: skip
    consensus: ConsensusConfig = Field(
        default_factory=ConsensusConfig, description="the release's consensus, with overrides"
    )
    judge: str | None = Field(
        default=None, description="openai:MODEL@URL[,...]: an LLM judge reads a sample of "
        "each round's episodes (a consensus override: the arena judges with this model)",
    )  # fmt: skip
    judge_rate: float = Field(default=0.25, ge=0, le=1, description="share of tasks it reads")
    judge_budget: int | None = Field(
        default=None, ge=1024, description="its prompt budget in tokens (default: the "
        "release's; lower it for a small server context)",
    )  # fmt: skip

    @field_validator("judge")
    @classmethod
    def _judge_spec(cls, spec: str | None) -> str | None:
        if spec is not None:
            from shopbench.judging.llm.config import parse_judge_spec

            models = {e.model for e in parse_judge_spec(spec)}
            if len(models) != 1:
                raise ValueError(f"the arena's judge serves one model, got {sorted(models)}")
        return spec

    @field_validator("policies")
    @classmethod
    def _reference(cls, names: list[str]) -> list[str]:
        for name in names:
            if name.startswith(HF_PREFIX):
                check_spec(name)  # a model directory with weights and a chat template
            elif name not in (*SERVABLE_POLICIES, *CLARIFY_POLICIES, *SERVABLE_ADVERSARIES):
                raise ValueError(
                    f"unknown policy {name!r}; allowed: {', '.join(SERVABLE_POLICIES)}, "
                    f"{', '.join(CLARIFY_POLICIES)} (clarify tasks), the adversaries "
                    f"{', '.join(SERVABLE_ADVERSARIES)}, or hf:PATH"
                )
        return names

    @field_validator("policy_options")
    @classmethod
    def _no_turn_timeout(cls, options: PolicyOptions) -> PolicyOptions:
        if options.turn_timeout_s is not None:
            raise ValueError("the arena's turn timeout is turn_timeout_s (--turn-timeout)")
        return options

    @model_validator(mode="after")
    def _options_reach_a_model(self) -> ArenaConfig:
        check_applies(self.policy_options, self.policies)
        return self

    def catalog_dir(self) -> Path:
        """Where the catalog is (built)."""
        return self.catalog or self.out / f"catalog-{self.products}-s{self.seed}"


class MinerRow(BaseModel):
    """One line of the leaderboard (and of ``arena.json``)."""

    uid: int
    hotkey: str
    policy: str
    model: str | None = None
    """The model the miner's agent card named in its last round (None: no card came)."""
    episodes: int
    asr: float
    process_score: float
    ema: float
    weight: float
    copy_of: int | None = None
    """The uid whose decisions this miner followed in its last round (those tasks counted 0)."""


def parse_added(specs: Sequence[str]) -> list[AddedMiner]:
    """``--add-miner URL=HOTKEY`` values as :class:`AddedMiner` (ArenaError on a bad one)."""
    return [AddedMiner.parse(s) for s in specs]
