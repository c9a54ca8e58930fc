"""Task intents as declared units: one :class:`~.spec.IntentSpec` per intent, one registry.

To add an intent, add a module here declaring its ``SPEC`` and name it in
:data:`.registry.BUILTIN`; the signed records' intent vocabulary
(:data:`shopbench.records.task.Intent`) gains its name.
"""
