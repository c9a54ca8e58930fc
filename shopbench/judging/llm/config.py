"""How the LLM judge reaches its endpoints, and the ``openai:MODEL@URL`` spec that names them.

One endpoint is an OpenAI-compatible API root (vLLM's ``.../v1``) and the model name it
serves; several make an ensemble whose verdict is the median. Timeouts, retries and the
per-trajectory deadline bound how long one judgement may take, so a slow or dead endpoint
delays a round by at most the deadline.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shopbench.judging.errors import JudgeSpecError
from shopbench.judging.llm.release import RELEASE, JudgeRelease
from shopbench.openai_compat.config import EndpointSettings
from shopbench.openai_compat.spec import OPENAI_PREFIX, split_openai_spec
from shopbench.openai_compat.urls import api_root, chat_url, models_url

SPEC_PREFIX = OPENAI_PREFIX
_EXAMPLE = "openai:Qwen/Qwen3-32B@http://127.0.0.1:8000/v1"
API_KEY_VARIABLES = ("SHOPBENCH_JUDGE_API_KEY", "SHOPBENCH_OPENAI_API_KEY", "OPENAI_API_KEY")
"""Environment variables read, in order, for the judge endpoints' bearer token (by
:func:`shopbench.openai_compat.keys.api_key_from_env`)."""


class Endpoint(BaseModel):
    """One OpenAI-compatible server and the model name to ask it for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(description="API root, e.g. http://127.0.0.1:8000/v1")
    model: str = Field(min_length=1, description="model name as the server serves it")
    api_key: str | None = Field(default=None, description="bearer token, if the server needs one")

    @model_validator(mode="after")
    def _http(self) -> Endpoint:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"{self.base_url!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)"
            )
        return self

    @property
    def root(self) -> str:
        """The API root: the base URL, with ``/v1`` added when it has no path."""
        return api_root(self.base_url)

    @property
    def chat_url(self) -> str:
        """The chat-completions URL."""
        return chat_url(self.base_url)

    @property
    def models_url(self) -> str:
        """The model-list URL (``GET /v1/models``)."""
        return models_url(self.base_url)

    def __str__(self) -> str:
        return f"{self.model}@{self.base_url}"


class LLMJudgeConfig(EndpointSettings):
    """Everything an :class:`~shopbench.judging.llm.judge.LLMJudge` is built with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoints: list[Endpoint] = Field(
        min_length=1, description="servers asked; more than one makes a median ensemble"
    )
    release: JudgeRelease = Field(default=RELEASE, description="model, prompt, rubric, budget")
    override: bool = Field(
        default=False,
        description="local mode, arena and calibration only: endpoints may serve models "
        "other than the release's; each is checked against its own name instead",
    )
    quorum: int = Field(default=1, ge=1, description="members that must answer for a verdict")
    connect_timeout_s: float = Field(default=5.0, gt=0, description="seconds to connect")
    backoff_s: float = Field(default=1.0, ge=0, description="first retry delay; doubles")
    jitter: float = Field(
        default=0.0, ge=0, le=1,
        description="up to this fraction of each backoff wait is taken off at random; 0: the "
        "exact doubling",
    )  # fmt: skip
    deadline_s: float = Field(
        default=300.0, gt=0, description="seconds one trajectory's judgement may take in all"
    )
    identity_ttl_s: float = Field(
        default=600.0, ge=0, description="seconds a /v1/models check is trusted before rechecking"
    )
    structured: Literal["json_schema", "none"] = Field(
        default="json_schema",
        description="json_schema: ask for structured output (response_format); none: plain "
        "text read by the tolerant extractor",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=lambda: {"chat_template_kwargs": {"enable_thinking": False}},
        description="more request fields; the default turns Qwen3's thinking off, as the "
        "schema already asks for a reason before each verdict",
    )
    concurrency: int = Field(default=8, ge=1, description="requests in flight per endpoint")
    max_response_bytes: int = Field(default=1 << 20, ge=1024, description="reply size cap")

    @model_validator(mode="after")
    def _pinned(self) -> LLMJudgeConfig:
        if self.quorum > len(self.endpoints):
            raise ValueError(
                f"quorum {self.quorum} is more than the {len(self.endpoints)} endpoints"
            )
        if not self.override:
            other = [e for e in self.endpoints if e.model != self.release.model]
            if other:
                raise ValueError(
                    f"endpoint {other[0]} names model {other[0].model!r}, but the release's "
                    f"judge is {self.release.model!r}; only local mode, the arena and "
                    "calibration may override it"
                )
        return self


def parse_judge_spec(spec: str, api_key: str | None = None) -> list[Endpoint]:
    """The endpoints of ``openai:MODEL@URL`` or a comma-separated list of such specs.

    Raises :class:`JudgeSpecError` saying which part is malformed.
    """
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise JudgeSpecError("--judge is empty; expected openai:MODEL@URL")
    out: list[Endpoint] = []
    for part in parts:
        if not part.startswith(SPEC_PREFIX):
            raise JudgeSpecError(f"judge {part!r}: expected openai:MODEL@URL, e.g. {_EXAMPLE}")
        model, url = split_openai_spec(part, kind="judge", example=_EXAMPLE, error=JudgeSpecError)
        out.append(Endpoint(base_url=url, model=model, api_key=api_key))
    return out
