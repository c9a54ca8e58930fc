"""The shopper pack's handler: the customer a clarify task's agent asks (``ask_shopper``).

The shopper (:mod:`.shopper`) answers from the task's hidden card: it reads a question's
topics (:mod:`.questions`), says the constraint in the query's own forms (:mod:`.answers`),
and may have an LLM reword it, the words kept only when faithful (:mod:`.rephrase`). Its tool
and how an episode opens it are :mod:`.tools`; the pack it handles, with how every other
layer shows the conversation, is :mod:`shopbench.packs.shopper`.
"""
