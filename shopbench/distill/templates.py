"""Chat templates for training: the model's own, with generation markers, or a clear refusal.

Assistant-only loss needs a template that marks the assistant's output with ``{% generation
%}`` / ``{% endgeneration %}``. A template that has them is used as it is; one that TRL knows
(Qwen3's among them) is swapped for TRL's training variant, which also renders the ``<think>``
block on every assistant step; any other is refused before training starts.
"""

from __future__ import annotations

from typing import Any

from shopbench.agents.format.tokens import REPLY_TOKENS
from shopbench.distill.errors import TemplateError, TokenizerError


def check_tokens(tokenizer: Any, required: tuple[str, ...] = REPLY_TOKENS) -> None:
    """TokenizerError naming the tokens of `required` that `tokenizer` does not encode as a
    single token of its vocabulary."""
    missing = []
    vocab = tokenizer.get_vocab()
    for token in required:
        ids = tokenizer.encode(token, add_special_tokens=False)
        if token not in vocab or len(ids) != 1:
            missing.append(token)
    if missing:
        raise TokenizerError(
            f"the tokenizer lacks the tool-call and reasoning tokens {', '.join(missing)} "
            "(prepare the model with shopbench.distill.models.add_format_tokens, or pick a "
            "model whose tokenizer has them)"
        )


def training_template(tokenizer: Any) -> str:
    """The chat template to train `tokenizer`'s model with: its own when it already has
    generation markers, TRL's training variant when TRL knows it; TemplateError otherwise."""
    from trl.chat_template_utils import get_training_chat_template

    own = tokenizer.chat_template
    if isinstance(own, dict):
        own = own.get("default")
    if not own:
        raise TemplateError(
            "the model has no chat template; give it Qwen3's (shopbench.distill.models."
            "use_qwen3_template) or one with {% generation %} markers"
        )
    try:
        patched = get_training_chat_template(tokenizer)
    except ValueError:
        raise TemplateError(
            "the model's chat template is neither one TRL knows (Qwen3, Llama 3, ...) nor "
            "marked with {% generation %} / {% endgeneration %}, so assistant-only loss "
            "cannot be computed; give it Qwen3's template or add the markers"
        ) from None
    return patched if patched is not None else own
