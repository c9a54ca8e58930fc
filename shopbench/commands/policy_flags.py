"""The flags of a model policy's options, the same on every command that names a policy.

``shopbench eval``, ``distill eval``, ``judge calibrate`` and ``arena`` take
``--policy-config FILE`` and the flags of :class:`~shopbench.agents.options.PolicyOptions`
as one block (:func:`policy_block`, declared once here); :func:`resolve` builds the
options from them, flags over the file, and the command receives them whole::

    @takes(policy_block(turn_timeout_default=60.0))
    def command(..., policy_options: PolicyOptions | None = None) -> None:
        ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from shopbench.agents.options import (
    PolicyOptions,
    parse_template_args,
    resolve_policy_options,
)
from shopbench.commands.blocks import Block, option
from shopbench.commands.flags import Flags

_OPTIONS = Flags(PolicyOptions)


def policy_config() -> Any:
    """``--policy-config FILE``."""
    return typer.Option(
        None, "--policy-config", help="a TOML, YAML or JSON file of model-policy options "
        "(keys: " + ", ".join(PolicyOptions.model_fields) + "); flags win over it",
    )  # fmt: skip


def temperature() -> Any:
    """``--temperature``."""
    return _OPTIONS.option("temperature", "--temperature")


def top_p() -> Any:
    """``--top-p``."""
    return _OPTIONS.option("top_p", "--top-p")


def max_tokens() -> Any:
    """``--max-tokens``."""
    return _OPTIONS.option("max_tokens", "--max-tokens")


def sampling_seed() -> Any:
    """``--sampling-seed`` (the file's ``seed``; ``--seed`` is the run's)."""
    info = PolicyOptions.model_fields["seed"]
    return _OPTIONS.option(
        "seed", "--sampling-seed", help=f"{info.description} (the file's seed key)"
    )


def request_timeout() -> Any:
    """``--request-timeout``."""
    return _OPTIONS.option("request_timeout_s", "--request-timeout")


def turn_timeout(default_s: float) -> Any:
    """``--turn-timeout``; `default_s` is the command's own, used when neither the flag nor
    the file sets one."""
    return _OPTIONS.option(
        "turn_timeout_s", "--turn-timeout",
        help=f"seconds the episode loop gives a policy for one turn (default {default_s:g})",
    )  # fmt: skip


def template_arg() -> Any:
    """``--template-arg KEY=VALUE`` (repeatable)."""
    return typer.Option(
        [], "--template-arg", help="chat-template argument KEY=VALUE of a model policy "
        "(repeatable; VALUE read as JSON when it is), e.g. enable_thinking=false",
    )  # fmt: skip


def view() -> Any:
    """``--view``: the observation view a model policy reads."""
    return _OPTIONS.option("view", "--view")


def resolve(
    path: Path | None,
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    request_timeout_s: float | None = None,
    turn_timeout_s: float | None = None,
    template_arg: list[str] | None = None,
    view: str | None = None,
) -> PolicyOptions:
    """The options of the file at `path` (None: none) with the flags given on top. A flag's
    refused value is a usage error naming it; the file's, an error naming the file."""
    flags = _OPTIONS.build(
        temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed,
        request_timeout_s=request_timeout_s, turn_timeout_s=turn_timeout_s,
        template_kwargs=parse_template_args(template_arg or []), view=view,
    )  # fmt: skip
    return resolve_policy_options(path, flags)


def policy_block(turn_timeout_default: float, *, request_timeout_flag: bool = True) -> Block:
    """The model-policy options as one block, built into ``policy_options``
    (:class:`PolicyOptions`). `turn_timeout_default` is the command's own turn timeout,
    said in the help; `request_timeout_flag` False leaves ``--request-timeout`` out (a
    command whose policies make no requests of their own)."""
    parameters = [
        option("policy_config", Path | None, policy_config()),
        option("temperature", float | None, temperature()),
        option("top_p", float | None, top_p()),
        option("max_tokens", int | None, max_tokens()),
        option("sampling_seed", int | None, sampling_seed()),
        *([option("request_timeout", float | None, request_timeout())]
          if request_timeout_flag else []),
        option("turn_timeout", float | None, turn_timeout(turn_timeout_default)),
        option("template_arg", list[str], template_arg()),
        option("view", str | None, view()),
    ]  # fmt: skip

    def build(
        policy_config: Path | None, temperature: float | None, top_p: float | None,
        max_tokens: int | None, sampling_seed: int | None, turn_timeout: float | None,
        template_arg: list[str], view: str | None = None, request_timeout: float | None = None,
    ) -> PolicyOptions:  # fmt: skip
        return resolve(
            policy_config, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
            seed=sampling_seed, request_timeout_s=request_timeout, turn_timeout_s=turn_timeout,
            template_arg=template_arg, view=view,
        )  # fmt: skip

    return Block("policy_options", parameters, build)
