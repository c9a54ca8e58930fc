"""The neurons' configuration: one typed class per component, in bittensor's flag style.

``ValidatorConfig`` and ``MinerConfig`` are assembled from sections — ``wallet``,
``subtensor``, ``axon``, ``neuron``, ``agent``, ``local``, ``logging`` — each a pydantic
model whose field descriptions are the ``--help`` texts. :func:`validator_config` and
:func:`miner_config` parse them from flags (``--netuid``, ``--wallet.name``,
``--neuron.concurrency``...), ``SHOPBENCH_*`` environment variables and ``--config FILE``
(see :mod:`template.base.options`).

The consensus bundle (:class:`shopbench.scoring.consensus.ConsensusConfig`: judge, rubric,
score formula, template penalty, EMA and weight curve, and the spec version they are
released under) is fixed by the release: it has no flag, no variable and no file key. Only
the local arena builds a validator with another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shopbench.agents.errors import PolicyOptionsError
from shopbench.agents.options import (
    LOOP_OPTIONS,
    PolicyOptions,
    load_policy_options,
    parse_template_args,
)
from shopbench.records.task import INTENTS, Intent
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.trajectory.loop import DEFAULT_TURN_TIMEOUT_S
from template.base.options import parse_config
from template.base.restart import restart_file_path


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WalletConfig(_Section):
    """Which keys sign: a bittensor wallet on disk."""

    name: str = Field(default="default", min_length=1, description="wallet (coldkey) name")
    hotkey: str = Field(default="default", min_length=1, description="hotkey name in the wallet")
    path: str = Field(default="~/.bittensor/wallets", description="directory of the wallets")


class SubtensorConfig(_Section):
    """Which chain."""

    network: str = Field(
        default="finney",
        description="finney, test, local, a ws(s):// endpoint URL, or memory://HOST:PORT (a "
        "development chain served by `shopbench chain serve`)",
    )

    @field_validator("network")
    @classmethod
    def _known_network(cls, value: str) -> str:
        from bittensor.settings import NETWORKS

        from template.chain.memory.wire import is_memory_network, parse_url

        if is_memory_network(value):
            parse_url(value)  # ValueError naming the malformed address
        elif value not in NETWORKS and not value.startswith(("ws://", "wss://")):
            raise ValueError(
                f"unknown network {value!r}: give one of {', '.join(sorted(NETWORKS))}, a "
                "ws(s):// endpoint URL, or memory://HOST:PORT"
            )
        return value


ROOT_NETUID = 0
"""The root network's netuid: no subnet's, so a neuron given it was given a placeholder."""


def _subnet_netuid(value: int | None) -> int | None:
    """`value` unless it is the root network's netuid (ValueError naming what to give)."""
    if value == ROOT_NETUID:
        raise ValueError(
            f"netuid {ROOT_NETUID} is the root network, not a subnet: give your subnet's "
            "netuid (`btcli subnets list` shows them)"
        )
    return value


class AxonConfig(_Section):
    """Where the miner listens and what address it publishes on chain."""

    ip: str = Field(default="0.0.0.0", description="address to bind")
    port: int = Field(default=8091, ge=0, le=65535, description="port to bind; 0 picks a free one")
    external_ip: str | None = Field(
        default=None, description="address published on chain (default: --axon.ip when it is "
        "a concrete address)",
    )  # fmt: skip
    external_port: int | None = Field(
        default=None, ge=1, le=65535, description="port published on chain (default: the bound one)"
    )


class LoggingConfig(_Section):
    """How the neuron logs."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="least severity logged"
    )
    format: Literal["json", "text"] = Field(
        default="json", description="json: one object per line (for log shippers); text: for people"
    )
    file: str | None = Field(
        default=None, description="also write the log to this file, rotated by size (stderr "
        "keeps it too; default: stderr only)",
    )  # fmt: skip
    max_mb: float = Field(
        default=100.0, gt=0, description="size in MB at which --logging.file is rotated"
    )
    backups: int = Field(
        default=5, ge=0, description="rotated log files kept beside --logging.file (FILE.1, ...)"
    )


class ClockConfig(_Section):
    """The start-up clock check (signed requests older than 10 s or from more than 2 s in
    the future are refused, so a skewed clock loses every request)."""

    ntp_servers: list[str] = Field(
        default_factory=lambda: ["pool.ntp.org"],
        description="NTP servers asked for the clock offset at start (none: skip the query)",
    )
    max_offset_s: float = Field(
        default=2.0, gt=0, description="refuse to start when the clock is off by more than this"
    )
    timeout_s: float = Field(default=2.0, gt=0, description="time to wait for each NTP server")


class LLMJudgeSection(_Section):
    """The validator's LLM judge servers; without any, the rubric judges alone."""

    urls: list[str] = Field(
        default_factory=list, description="OpenAI-compatible API roots serving the release's "
        "judge model, e.g. http://127.0.0.1:8000/v1 (several: a median ensemble)",
    )  # fmt: skip
    sample_rate: float = Field(
        default=0.25, ge=0, le=1, description="share of each round's tasks the LLM judge reads"
    )
    deadline_s: float = Field(
        default=600.0, gt=0, description="seconds a round's LLM judgements may take"
    )
    quorum: int = Field(default=1, ge=1, description="judge servers that must answer")
    cache_dir: str | None = Field(
        default=None, description="verdict cache (default: FULL_PATH/judge-cache)"
    )


class ValidatorNeuronConfig(_Section):
    """The validator's loop: rounds, episodes, catalog rotation, weights, state, metrics."""

    full_path: str = Field(
        default="~/.shopbench/validator",
        description="directory of the state, the catalogs, the task banks and the archive",
    )
    archive_dir: str | None = Field(
        default=None, description="where trajectories are appended (default: FULL_PATH/archive)"
    )
    archive_url: str | None = Field(
        default=None,
        description="publish sealed shards to this fsspec URL (s3://bucket/prefix, file:///path;"
        " credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; default: keep them local)",
    )
    archive_endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint of archive_url (R2, MinIO)"
    )
    archive_upload_interval_s: float = Field(
        default=60.0, gt=0, description="seconds between upload passes (failures retried then)"
    )
    catalog_products: int = Field(
        default=2_500_000, ge=100, description="products in each secret catalog"
    )
    catalog_workers: int = Field(default=2, ge=1, description="processes building a catalog")
    catalog_rotation_epochs: int = Field(
        default=20, ge=0, description="epochs a catalog serves before a new seed (0: never)"
    )
    epoch_blocks: int = Field(
        default=360, ge=1, description="blocks per rotation epoch (the task bucket changes)"
    )
    intents: list[Intent] = Field(
        default_factory=lambda: list(INTENTS), min_length=1, description="task intents played"
    )
    tasks_per_round: int = Field(
        default=8, ge=1, le=256, description="tasks per round, the same for every miner"
    )
    bank_per_intent: int = Field(
        default=32, ge=1, description="tasks generated per intent and epoch to draw rounds from"
    )
    sample_size: int = Field(default=0, ge=0, description="miners per round (0: every serving uid)")
    concurrency: int = Field(default=64, ge=1, description="episodes played at once")
    turn_timeout_s: float = Field(
        default=DEFAULT_TURN_TIMEOUT_S, gt=0, le=600, description="time a miner has to answer "
        "one turn",
    )  # fmt: skip
    episode_timeout_s: float = Field(default=600.0, gt=0, description="time budget of one episode")
    round_timeout_s: float = Field(
        default=1800.0, gt=0, description="a round's episodes still running after this are cut"
    )
    min_round_interval_s: float = Field(
        default=60.0, ge=0, description="least time from one round's start to the next"
    )
    weights_interval_blocks: int = Field(
        default=100, ge=1, description="blocks between weight settings"
    )
    chain_retry_s: float = Field(
        default=12.0, gt=0, description="first wait after a failed chain write; doubles"
    )
    chain_retry_max_s: float = Field(
        default=600.0, gt=0, description="longest wait between chain write attempts"
    )
    metrics_port: int = Field(
        default=9100, ge=0, le=65535, description="port of the Prometheus /metrics (0: off)"
    )
    metrics_host: str = Field(default="0.0.0.0", description="address /metrics binds")
    restart_file: str | None = Field(
        default=None, description="when this file appears the validator finishes its round, "
        "saves its state, removes the file and exits with status 0, so its process manager "
        "restarts it on new code (default: FULL_PATH/restart-request.json)",
    )  # fmt: skip
    clock: ClockConfig = Field(default_factory=ClockConfig, description="start-up clock check")
    llm_judge: LLMJudgeSection = Field(
        default_factory=LLMJudgeSection, description="the LLM judge's servers"
    )


class ValidatorConfig(BaseModel):
    """Everything a validator is started with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    netuid: int = Field(ge=0, description="the subnet's netuid")
    wallet: WalletConfig = Field(default_factory=WalletConfig)
    subtensor: SubtensorConfig = Field(default_factory=SubtensorConfig)
    neuron: ValidatorNeuronConfig = Field(default_factory=ValidatorNeuronConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    consensus: ConsensusConfig = Field(default_factory=ConsensusConfig)

    _netuid = field_validator("netuid")(_subnet_netuid)

    @property
    def state_dir(self) -> Path:
        """The neuron's directory, expanded."""
        return Path(self.neuron.full_path).expanduser()

    @property
    def archive_dir(self) -> Path:
        """The root of the validator's archive store (segment, shards, manifests)."""
        if self.neuron.archive_dir:
            return Path(self.neuron.archive_dir).expanduser()
        return self.state_dir / "archive"

    @property
    def restart_path(self) -> Path:
        """The restart-request file the validator looks for between rounds."""
        return restart_file_path(self.neuron.full_path, self.neuron.restart_file)


MINER_TURN_MARGIN_S = 10.0
"""Seconds of the validators' turn timeout a miner keeps back from its model: the time to
verify the signed request, read the reply and send it back, so a model that uses all of its
``request_timeout_s`` still answers the turn in time."""


def _looks_like_a_path(name: str) -> bool:
    """Whether `name` reads as a filesystem path rather than a model's name."""
    return name.startswith(("/", "~", "./", "../")) or "\\" in name


def card_model_name(policy: str, model: str | None) -> str:
    """The model an ``hf:PATH`` miner's agent card names: `model` when the operator gave one,
    else PATH's last component, so that no local path goes into a public record."""
    from shopbench.agents.local.config import HF_PREFIX

    if model:
        return model
    path = policy.removeprefix(HF_PREFIX).strip().rstrip("/\\")
    return Path(path.replace("\\", "/")).name or "local-model"


class AgentConfig(_Section):
    """What answers the validators' turns: a model endpoint or a reference policy."""

    policy: str | None = Field(
        default=None,
        description="a reference policy (careful, greedy, ...) or a local model directory "
        "(hf:PATH) instead of a model server",
    )
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible API root of the model, e.g. "
        "http://127.0.0.1:8000/v1 (vllm serve)",
    )  # fmt: skip
    model: str | None = Field(
        default=None, description="model name the server serves; with --agent.policy hf:PATH, "
        "the name your agent card shows (default: PATH's last component: a card is public, a "
        "local path never goes on it)",
    )  # fmt: skip
    revision: str = Field(default="", description="model revision shown on the agent card")
    temperature: float | None = Field(
        default=None, ge=0, description="sampling temperature of the model (default: the "
        "policy's own: 0.6 for a model server, 0 for hf:)",
    )  # fmt: skip
    top_p: float | None = Field(
        default=None, gt=0, le=1, description="nucleus mass of the model (default: the "
        "policy's own: 0.95 for a model server, 1 for hf:)",
    )  # fmt: skip
    max_tokens: int | None = Field(
        default=None, ge=1, description="tokens the model generates per turn (default: the "
        "policy's own: 8192 for a model server, 512 for hf:)",
    )  # fmt: skip
    request_timeout_s: float = Field(
        default=DEFAULT_TURN_TIMEOUT_S - MINER_TURN_MARGIN_S, gt=0,
        description=f"time the model server has per turn (keep it under the validators' "
        f"{DEFAULT_TURN_TIMEOUT_S:g} s turn timeout, by {MINER_TURN_MARGIN_S:g} s or more)",
    )  # fmt: skip
    seed: int = Field(
        default=0, description="seed of a reference policy, and the sampling seed of the model "
        "(sent to a model server only when set)",
    )  # fmt: skip
    template_arg: list[str] = Field(
        default_factory=list, description="chat-template arguments KEY=VALUE of the model "
        "(VALUE read as JSON when it is), e.g. enable_thinking=false",
    )  # fmt: skip
    policy_config: Path | None = Field(
        default=None, description="a TOML, YAML or JSON file of the model's options (keys: "
        + ", ".join(k for k in PolicyOptions.model_fields if k not in LOOP_OPTIONS)
        + "); the flags above win over it",
    )  # fmt: skip

    @field_validator("template_arg")
    @classmethod
    def _template_args(cls, pairs: list[str]) -> list[str]:
        try:
            parse_template_args(pairs, "--agent.template_arg")
        except PolicyOptionsError as e:
            raise ValueError(str(e).removeprefix("--agent.template_arg: ")) from None
        return pairs

    @model_validator(mode="after")
    def _one_source(self) -> AgentConfig:
        from shopbench.agents.local.config import HF_PREFIX

        local = self.policy is not None and self.policy.startswith(HF_PREFIX)
        has_model = self.base_url is not None or (self.model is not None and not local)
        if self.policy is not None and has_model:
            raise ValueError("give --agent.policy or --agent.base_url/--agent.model, not both")
        if local and self.model is not None and _looks_like_a_path(self.model):
            raise ValueError(
                f"--agent.model {self.model!r} names the model on your public agent card: give "
                "a name, not a local path"
            )
        if self.policy is None and not (self.base_url and self.model):
            raise ValueError(
                "the miner needs an agent: --agent.base_url URL --agent.model NAME (an "
                "OpenAI-compatible server such as vllm serve) or --agent.policy NAME"
            )
        return self

    def spec(self) -> str:
        """The policy spec ``make_policy`` reads."""
        if self.policy is not None:
            return self.policy
        return f"openai:{self.model}@{self.base_url}"

    def policy_options(self) -> PolicyOptions:
        """The model's options: ``--agent.policy_config``'s, with the options set by flag,
        environment variable or ``--config`` over them (the request timeout is left to
        :func:`template.base.miner.make_agent`, which gives a model server its default).
        PolicyOptionsError names a refused file, or a turn timeout in it (the validators'
        to set)."""
        base = load_policy_options(self.policy_config) if self.policy_config else PolicyOptions()
        if base.turn_timeout_s is not None:
            raise PolicyOptionsError(
                f"{self.policy_config}: turn_timeout_s is the validators' to set; a miner "
                "bounds its model with request_timeout_s (--agent.request_timeout_s)"
            )
        given = self.model_fields_set
        top = {
            name: getattr(self, name)
            for name in ("temperature", "top_p", "max_tokens", "seed", "request_timeout_s")
            if name in given
        }
        top["template_kwargs"] = parse_template_args(self.template_arg, "--agent.template_arg")
        return base.over(PolicyOptions.model_validate(top))


class LocalConfig(_Section):
    """Local mode: serve without a chain, to known validator hotkeys only."""

    enabled: bool = Field(
        default=False, description="serve without a chain; --local.allow replaces the "
        "metagraph check", json_schema_extra={"flag": "local"},
    )  # fmt: skip
    allow: list[str] = Field(
        default_factory=list, description="validator hotkeys (ss58) served in local mode"
    )


class MinerNeuronConfig(_Section):
    """The miner's server and its standing checks."""

    max_active: int = Field(default=8, ge=1, description="turns the agent works on at once")
    max_waiting: int = Field(default=64, ge=0, description="turns queued when all are busy")
    min_stake: float = Field(
        default=1000.0, ge=0, description="least stake (alpha) of a validator served"
    )
    require_validator_permit: bool = Field(
        default=True, description="serve only validators holding a validator permit"
    )
    sync_interval_s: float = Field(
        default=60.0, gt=0, description="how often the metagraph is read again"
    )
    episode_log: Path | None = Field(
        default=None,
        description="append one JSON line per episode played to this file: its id, the "
        "validator, the query, turns, tool calls, first and last seen, how it ended "
        "(default: no log)",
    )
    episode_log_idle_s: float = Field(
        default=300.0, gt=0,
        description="an episode with no request for this long is logged as ended 'quiet'",
    )  # fmt: skip
    clock: ClockConfig = Field(default_factory=ClockConfig, description="start-up clock check")


class MinerConfig(BaseModel):
    """Everything a miner is started with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    netuid: int | None = Field(default=None, ge=0, description="the subnet's netuid")
    wallet: WalletConfig = Field(default_factory=WalletConfig)
    subtensor: SubtensorConfig = Field(default_factory=SubtensorConfig)
    axon: AxonConfig = Field(default_factory=AxonConfig)
    neuron: MinerNeuronConfig = Field(default_factory=MinerNeuronConfig)
    agent: AgentConfig | None = Field(default=None, description="the agent served")
    local: LocalConfig = Field(default_factory=LocalConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    _netuid = field_validator("netuid")(_subnet_netuid)

    @model_validator(mode="after")
    def _mode(self) -> MinerConfig:
        if self.local.enabled and not self.local.allow:
            raise ValueError("--local needs --local.allow HOTKEY[,HOTKEY]: the validators served")
        if self.agent is None:
            raise ValueError(
                "the miner needs an agent: --agent.base_url URL --agent.model NAME (an "
                "OpenAI-compatible server such as vllm serve) or --agent.policy NAME"
            )
        if not self.local.enabled and self.netuid is None:
            raise ValueError("--netuid is required unless the miner runs with --local")
        return self


def validator_config(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> ValidatorConfig:
    """The validator's config from flags, ``SHOPBENCH_*`` variables and ``--config``."""
    return parse_config(
        ValidatorConfig, argv, prog="neurons/validator.py", env=env,
        description="A shopbench validator: plays shopping episodes against the subnet's "
        "miners, grades them, sets weights and archives every trajectory.",
        fixed=frozenset({"consensus"}),
    )  # fmt: skip


def miner_config(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> MinerConfig:
    """The miner's config from flags, ``SHOPBENCH_*`` variables and ``--config``."""
    return parse_config(
        MinerConfig, argv, prog="neurons/miner.py", env=env,
        description="A shopbench miner: serves a shopping agent (a model behind an "
        "OpenAI-compatible URL, or a reference policy) to the subnet's validators.",
    )  # fmt: skip
