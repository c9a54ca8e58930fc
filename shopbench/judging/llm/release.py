"""The LLM judge's consensus parameters: the one place they are written down.

Every validator of a release must send the same prompt to the same model at the same
revision and score its answer with the same rubric, or their verdicts drift apart; so the
model, its revision, the prompt and rubric versions, the sampling settings and the token
budget are fixed here and go into the judge id that every verdict carries. Only local mode,
the arena and offline calibration may use another (``LLMJudgeConfig.override``).
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field

JUDGE_MODEL = "Qwen/Qwen3-32B"
"""The model validators serve for the LLM judge (its Hugging Face name, sent as ``model``)."""

JUDGE_REVISION = "9216db5781bf21249d130ec9da846c4624c16137"
"""The Hugging Face commit of :data:`JUDGE_MODEL` the release was calibrated with."""

PROMPT_VERSION = "v2"
"""Selects ``shopbench/judging/llm/prompts/llm_judge_<version>.txt``."""

RUBRIC_VERSION = "4"
"""The rubric file whose criteria the model judges (the rubric judge's own file)."""

JUDGE_VERSION = "2"
"""Version of the LLM judge's code: rendering (2: the validator's facts), truncation, reply
reading, scoring."""


class JudgeRelease(BaseModel):
    """What the LLM judge of one release is: model, prompt, rubric, sampling, budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(default=JUDGE_MODEL, min_length=1, description="judge model name")
    revision: str = Field(
        default=JUDGE_REVISION,
        description="model revision (a commit); empty: not pinned, not checked",
    )
    prompt_version: str = Field(default=PROMPT_VERSION, pattern=r"^[A-Za-z0-9_.-]+$")
    rubric_version: str = Field(default=RUBRIC_VERSION, min_length=1)
    judge_version: str = Field(default=JUDGE_VERSION, min_length=1)
    seed: int = Field(default=0, description="sampling seed sent with every request")
    max_reply_tokens: int = Field(default=2048, ge=256, description="tokens of one reply")
    prompt_budget_tokens: int = Field(
        default=24576, ge=1024, description="estimated tokens the prompt may take"
    )
    bytes_per_token: float = Field(
        default=2.5, gt=0, le=8,
        description="UTF-8 bytes per token assumed when estimating a prompt's tokens; low "
        "on purpose (Qwen's tokenizer spells digits one by one, and observations are full "
        "of ids and prices), so that estimates err long",
    )

    @property
    def context_tokens(self) -> int:
        """The context window a judge server must offer: prompt budget plus reply."""
        return self.prompt_budget_tokens + self.max_reply_tokens

    def fingerprint(self) -> str:
        """A short hash of every field, so that two releases differing anywhere differ."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


RELEASE = JudgeRelease()
"""The LLM judge of this release."""
