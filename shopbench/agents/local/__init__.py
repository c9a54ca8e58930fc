"""The policy over local weights: ``hf:PATH``, a model directory played with ``transformers``.

- :mod:`.config`: :class:`HFPolicyConfig` (decoding, batching, chat-template arguments) and the
  model directory's checks, which import no torch.
- :mod:`.render`: the conversation rendered with the model's chat template and the tool schemas.
- :mod:`.parse`: the generated text read as an assistant message (``<think>`` reasoning,
  hermes ``<tool_call>`` blocks).
- :mod:`.engine`: the loaded model and one batched ``generate`` call.
- :mod:`.batcher`: the pending turns of concurrent episodes gathered into one generation.
- :mod:`.policy`: :class:`HFPolicy`, what the registry makes of ``hf:PATH``.
"""
