"""Is this endpoint serving the judge the release pins? Checked through ``GET /v1/models``.

A validator whose server serves another model (or another revision, or too short a context
for the release's prompt budget) must not judge with it: its verdicts would disagree with
every other validator's. The check reads the server's model list — vLLM reports ``id`` (the
served name), ``root`` (the model path or name) and ``max_model_len`` — and refuses the
endpoint with a reason that says what was served and what was expected.

The revision can be checked only where the server reveals it: a served name
``MODEL@REVISION``, or a root that is a Hugging Face snapshot directory
(``.../snapshots/<commit>``). vLLM does not report ``--revision`` itself, so validators
serve the pinned snapshot directory with ``--served-model-name MODEL`` to make it visible.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_REVISION = re.compile(r"(?:snapshots/|@)([0-9a-f]{40})(?:/|$)")


class ServedModel(BaseModel):
    """One entry of ``/v1/models``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    root: str | None = None
    max_model_len: int | None = None

    def revision(self) -> str | None:
        """The commit this entry reveals (in its id or root), or None."""
        for text in (self.id, self.root or ""):
            found = _REVISION.search(text)
            if found:
                return found.group(1)
        return None


class IdentityCheck(BaseModel):
    """The outcome of checking one endpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str
    ok: bool
    served: list[str] = Field(default_factory=list, description="the model ids the server lists")
    revision: str | None = Field(default=None, description="the revision it revealed, if any")
    reason: str


def served_models(body: Any) -> list[ServedModel]:
    """The entries of a ``/v1/models`` body; ValueError when it is not a model list."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError("the /v1/models reply has no data list")
    out = []
    for item in data:
        try:
            out.append(ServedModel.model_validate(item))
        except ValidationError:
            continue  # an entry without an id serves nothing we could ask for
    return out


def check_identity(
    endpoint: str,
    served: list[ServedModel],
    model: str,
    revision: str | None,
    context_tokens: int | None,
) -> IdentityCheck:
    """Whether `served` offers `model` (at `revision` when pinned and revealed) with a context
    of at least `context_tokens` (when reported)."""
    ids = [m.id for m in served]
    matches = [m for m in served if m.id == model or m.id.startswith(model + "@")]
    if not matches:
        listed = ", ".join(repr(i) for i in ids) or "nothing"
        return IdentityCheck(
            endpoint=endpoint, ok=False, served=ids,
            reason=f"{endpoint} serves {listed}, not the judge model {model!r}",
        )
    entry = matches[0]
    seen = entry.revision()
    if revision and seen and seen != revision:
        return IdentityCheck(
            endpoint=endpoint, ok=False, served=ids, revision=seen,
            reason=f"{endpoint} serves {model!r} at revision {seen}, not the pinned {revision}",
        )
    if context_tokens and entry.max_model_len is not None and entry.max_model_len < context_tokens:
        return IdentityCheck(
            endpoint=endpoint, ok=False, served=ids, revision=seen,
            reason=f"{endpoint} serves {model!r} with a {entry.max_model_len}-token context; "
            f"the judge needs {context_tokens} (serve it with --max-model-len {context_tokens})",
        )
    if revision and not seen:
        why = f"{endpoint} serves {model!r}; revision not reported (pinned {revision})"
    else:
        why = f"{endpoint} serves {model!r}" + (f" at revision {seen}" if seen else "")
    return IdentityCheck(endpoint=endpoint, ok=True, served=ids, revision=seen, reason=why)
