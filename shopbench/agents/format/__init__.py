"""The model's text format: what a model reads and writes around its turns, in one place.

Qwen3's chat format, which vLLM's hermes tool parser and qwen3 reasoning parser read and
which the models distilled here are trained to write:

- :mod:`.markers`: the marker strings (``<think>``, ``<tool_call>``, ``<tool_response>``
  and the ChatML turn markers), each declared once;
- :mod:`.tokens`: the tokens a tokenizer (and the model over it) must hold for the format;
- :mod:`.parse`: a completion read into an assistant message, one reader for ``hf:`` and
  ``openai:`` alike;
- :mod:`.render`: a conversation rendered for a chat template, in the hermes form for a
  template that knows no tools.

How a tool result becomes the text a model reads (the observation views) belongs here too.
"""
