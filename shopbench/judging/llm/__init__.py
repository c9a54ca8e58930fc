"""The LLM judge, in modules with one job each.

``release`` (the consensus pins), ``config`` (endpoints, timeouts, the ``openai:MODEL@URL``
spec), ``client`` (HTTP with retries), ``identity`` (``/v1/models`` check), ``view`` and
``truncate`` and ``render`` (the prompt), ``reply`` (the schema and reading answers),
``ensemble`` (scoring and the median), ``cache``, ``fallback``, ``agreement`` (Spearman for
calibration) and ``judge`` (:class:`LLMJudge`). :mod:`shopbench.judging.llm.build` is the
entry point most callers want.
"""
