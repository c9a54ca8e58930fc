"""The policy over local weights: ``hf:PATH``, a model directory played with ``transformers``.

- :mod:`.config`: :class:`HFPolicyConfig` (decoding, batching, chat-template arguments) and the
  model directory's checks, which import no torch.
- :mod:`.engine`: the loaded model and one batched ``generate`` call.
- :mod:`.batcher`: the pending turns of concurrent episodes gathered into one generation.
- :mod:`.policy`: :class:`HFPolicy`, what the registry makes of ``hf:PATH``.

The prompt is rendered and the generation read by :mod:`shopbench.agents.format`, the model's
text format, which an endpoint's replies are read by too.
"""
