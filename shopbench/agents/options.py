"""The options of a model policy, from flags or a config file: :class:`PolicyOptions`.

One model for every place a policy is named (``shopbench eval``, ``distill eval``, ``judge
calibrate``, the arena, the miner): the decoding (temperature, top-p, tokens a turn, the
sampling seed), the timeouts (a request to an endpoint, a turn of the episode loop) and the
chat template's arguments (Qwen3's ``enable_thinking``, say). :meth:`PolicyOptions.options`
maps them onto the fields the kind of spec takes (``hf:`` is
:class:`~shopbench.agents.local.config.HFPolicyConfig`, ``openai:``
:class:`~shopbench.agents.openai_policy.OpenAIPolicyConfig`); a reference policy takes none.

A config file (``--policy-config FILE``: TOML, YAML or JSON by its suffix) holds the same
keys at its top level; :func:`load_policy_options` refuses a key that is not one, listing
those that are, and flags given beside it win over it (:meth:`PolicyOptions.over`)::

    max_tokens = 2048
    temperature = 0.6
    top_p = 0.95
    seed = 7
    request_timeout_s = 120

    [template_kwargs]
    enable_thinking = false
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shopbench.agents.errors import PolicyOptionsError
from shopbench.agents.format.views import ObservationView, recorded_view, resolve_view
from shopbench.agents.local.config import HF_PREFIX, model_path
from shopbench.agents.local.grammar import Decoding
from shopbench.datafiles import read_mapping
from shopbench.errors import first_problem
from shopbench.openai_compat.spec import OPENAI_PREFIX

SAMPLED_TEMPERATURE = 0.6
"""Temperature of K > 1 samples unless one is given (Qwen3's own recommendation)."""
SAMPLED_TOP_P = 0.95
"""Top-p of K > 1 samples unless one is given."""
LOOP_OPTIONS = frozenset({"turn_timeout_s"})
"""Options of the episode loop rather than of the model: they apply to every policy."""


class PolicyOptions(BaseModel):
    """Every option a model policy takes, for ``hf:`` and ``openai:`` specs alike; unset ones
    leave the policy its own default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float | None = Field(
        default=None, ge=0,
        description=f"sampling temperature of a model policy; default the policy's own "
        f"(distill eval: 0 for one sample, {SAMPLED_TEMPERATURE:g} for K > 1)",
    )  # fmt: skip
    top_p: float | None = Field(
        default=None, gt=0, le=1,
        description=f"nucleus mass of a model policy; default the policy's own (distill "
        f"eval: 1 for one sample, {SAMPLED_TOP_P:g} for K > 1)",
    )  # fmt: skip
    max_tokens: int | None = Field(
        default=None, ge=1, description="tokens a model policy generates per turn; default "
        "the policy's own (hf: 512, openai: 8192)",
    )  # fmt: skip
    seed: int | None = Field(
        default=None, description="sampling seed of a model policy (sample k of an "
        "evaluation uses seed + k); default the run's seed for hf:, none sent for openai:",
    )  # fmt: skip
    request_timeout_s: float | None = Field(
        default=None, gt=0, description="seconds an openai: policy waits for one request; "
        "default the policy's own (300)",
    )  # fmt: skip
    turn_timeout_s: float | None = Field(
        default=None, gt=0, description="seconds the episode loop gives a policy for one turn; "
        "default the command's own",
    )  # fmt: skip
    template_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="chat-template arguments of a model policy, e.g. {\"enable_thinking\": "
        "false}",
    )  # fmt: skip
    max_batch: int | None = Field(
        default=None, ge=1, description="turns of concurrent episodes an hf: model generates "
        "in one call; default the policy's own (8)",
    )  # fmt: skip
    kv_cache_tokens: int | None = Field(
        default=None, ge=0, description="tokens of earlier turns' keys and values an hf: "
        "model keeps across turns (0: none); default the policy's own (0)",
    )  # fmt: skip
    decoding: Decoding | None = Field(
        default=None, description="how an hf: model decodes its tool calls: free, "
        "constrained (each call under a grammar of the tool schemas, ids limited to those the "
        "episode showed) or grounded (constrained, prices built from the customer's numbers); "
        "default free",
    )  # fmt: skip
    engine: Literal["transformers", "onnxruntime-genai"] | None = Field(
        default=None, description="the runtime an hf: model runs on: transformers, or "
        "onnxruntime-genai over the model's onnx folder (shopbench distill export-onnx "
        "writes it); default transformers",
    )  # fmt: skip
    example: Path | None = Field(
        default=None, description="an hf: model's worked episode: a JSON file of one "
        "episode's messages shown before every task",
    )  # fmt: skip
    view: str | None = Field(
        default=None, description="observation view a model policy reads its tool results "
        "in (full, compact, with /hN a history window: compact/h2); default the one recorded "
        "in an hf: model's directory, else full",
    )  # fmt: skip

    @field_validator("view")
    @classmethod
    def _view_id(cls, value: str | None) -> str | None:
        if value is not None:
            ObservationView.from_id(value)
        return value

    def model_options_given(self) -> list[str]:
        """The options set that only a model policy takes (the loop's are left out)."""
        return sorted(
            n for n in self.model_fields_set
            if n not in LOOP_OPTIONS and getattr(self, n) not in (None, {})
        )  # fmt: skip

    def options(
        self, spec: str, samples: int = 1, *, defaults: bool = True, sample: int = 0
    ) -> dict[str, Any]:
        """The keyword options :func:`~shopbench.agents.registry.make_policy` takes for
        `spec`'s kind, for sample `sample` of `samples` (its seed is ``seed + sample``).

        With `defaults`, an unset temperature and top-p get this module's defaults for
        `samples`; without, only what was set is passed and the policy keeps its own. A
        reference policy gets nothing; ``request_timeout_s`` is an endpoint's alone."""
        sampled = samples > 1
        temperature, top_p = self.temperature, self.top_p
        if defaults and temperature is None:
            temperature = SAMPLED_TEMPERATURE if sampled else 0.0
        if defaults and top_p is None:
            top_p = SAMPLED_TOP_P if sampled else 1.0
        out: dict[str, Any] = {
            k: v for k, v in (("temperature", temperature), ("top_p", top_p)) if v is not None
        }
        if self.seed is not None:
            out["sampling_seed"] = self.seed + sample
        if self.view is not None:
            out["view"] = self.view
        name = spec.strip()
        if name.startswith(HF_PREFIX):
            if self.max_tokens is not None:
                out["max_new_tokens"] = self.max_tokens
            if self.template_kwargs:
                out["chat_template_kwargs"] = dict(self.template_kwargs)
            if self.max_batch is not None:
                out["max_batch"] = self.max_batch
            if self.kv_cache_tokens is not None:
                out["kv_cache_tokens"] = self.kv_cache_tokens
            if self.decoding is not None:
                out["decoding"] = self.decoding
            if self.engine is not None:
                out["engine"] = self.engine
            if self.example is not None:
                out["example"] = self.example
            return out
        if name.startswith(OPENAI_PREFIX):
            if self.max_tokens is not None:
                out["max_tokens"] = self.max_tokens
            if self.request_timeout_s is not None:
                out["request_timeout_s"] = self.request_timeout_s
            if self.template_kwargs:
                out["extra_body"] = {"chat_template_kwargs": dict(self.template_kwargs)}
            return out
        return {}

    def over(self, top: PolicyOptions) -> PolicyOptions:
        """These options with what `top` sets on top (flags over a config file); a None or
        empty value is not set. Template arguments merge key by key."""
        data = self.model_dump(exclude_unset=True)
        for key in top.model_fields_set:
            value = getattr(top, key)
            if value is None or value == {}:
                continue
            if key == "template_kwargs":
                value = {**data.get("template_kwargs", {}), **value}
            data[key] = value
        return PolicyOptions.model_validate(data)

    def without(self, *names: str) -> PolicyOptions:
        """These options with `names` unset (a command that applies them itself)."""
        data = self.model_dump(exclude_unset=True)
        return PolicyOptions.model_validate({k: v for k, v in data.items() if k not in names})


def is_model_spec(spec: str) -> bool:
    """Whether `spec` names a model policy (``hf:PATH``, ``openai:MODEL@URL``)."""
    name = spec.strip()
    return name.startswith(HF_PREFIX) or name.startswith(OPENAI_PREFIX)


def check_applies(options: PolicyOptions, specs: Iterable[str]) -> None:
    """PolicyOptionsError when model options are set but none of `specs` is a model policy:
    they would change nothing, which is never what was meant (reference policies among model
    ones simply take none); or when the view asked for differs from the one an ``hf:``
    model's directory records it was trained on."""
    given = options.model_options_given()
    names = [s for s in specs if s]
    if given and not any(is_model_spec(s) for s in names):
        raise PolicyOptionsError(
            f"{', '.join(given)} set, but no model policy is named ({', '.join(names)}: "
            "reference policies take no model options); name an hf:PATH or "
            "openai:MODEL@URL policy, or drop the options"
        )
    for name in names:
        if name.strip().startswith(HF_PREFIX):
            path = model_path(name)
            resolve_view(recorded_view(path) if path.is_dir() else None, options.view, str(path))


def parse_template_args(pairs: Sequence[str], flag: str = "--template-arg") -> dict[str, Any]:
    """``KEY=VALUE`` pairs as chat-template arguments, each VALUE read as JSON when it is
    JSON (``enable_thinking=false``) and as text otherwise; PolicyOptionsError names `flag`."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PolicyOptionsError(f"{flag}: {pair!r} is not KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def load_policy_options(path: str | Path) -> PolicyOptions:
    """The options in the config file at `path` (TOML, YAML or JSON by its suffix, the keys
    of :class:`PolicyOptions` at its top level). PolicyOptionsError names the file and a key
    that is not an option (listing those that are) or a value refused and why."""
    where = Path(path).expanduser()
    data = read_mapping(where, what="the policy options", error=PolicyOptionsError)
    keys = list(PolicyOptions.model_fields)
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise PolicyOptionsError(
            f"{where}: unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} (keys: {', '.join(keys)})"
        )
    try:
        return PolicyOptions.model_validate(data)
    except ValidationError as e:
        raise PolicyOptionsError(f"{where}: {first_problem(e, given=True)}") from None


def resolve_policy_options(path: str | Path | None, top: PolicyOptions) -> PolicyOptions:
    """The options of the config file at `path` (None: no file) with `top` (the flags) over
    them; PolicyOptionsError as :func:`load_policy_options` says."""
    base = load_policy_options(path) if path is not None else PolicyOptions()
    return base.over(top)
