"""Tool packs: an intent's extra tools, each declared once with how every layer shows it.

A pack (:class:`~shopbench.packs.pack.ToolPack`) names the tools it adds and carries the
hooks of the layers that read a record of them: the ATIF export, the trace browser, the LLM
judge's facts and the replay. Its handler (the typed tools that run, and the per-episode
state behind them) is registered at the environment's floor
(:mod:`shopbench.env.packs`). Built in: the web search of knowledge tasks
(:mod:`.web_search`) and the shopper of clarify tasks (:mod:`.shopper`).
"""
