"""The built-in task intents, one module each, every module declaring its ``SPEC``.

The model of a declaration and the registry that loads these modules are in
:mod:`shopbench.tasks.intent_registry`. To add an intent, add its name to the signed records'
intent vocabulary (:data:`shopbench.records.task.Intent`) and a module of that name here; the
registry's built-in intents are that vocabulary, in its order.
"""
