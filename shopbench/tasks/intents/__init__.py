"""The built-in task intents, one module each, every module declaring its ``SPEC``.

The model of a declaration and the registry that loads these modules are in
:mod:`shopbench.tasks.intent_registry`. To add an intent, add a module here and name it in
:data:`~shopbench.tasks.intent_registry.BUILTIN`; the signed records' intent vocabulary
(:data:`shopbench.records.task.Intent`) gains its name.
"""
