"""What an archived episode is made of — the records floor.

Just above the conversation (:mod:`shopbench.chat`) and importing nothing else of the
project: the task's wire half and its vocabulary (:mod:`.task`), the graded outcome
(:mod:`.outcome`), the judge's verdict as the record holds it (:mod:`.verdict`), the
:class:`~.trajectory.Trajectory` with its parts and the canonical bytes its signature covers
(:mod:`.trajectory`), and the one binding of a tool message to the validator's tool-log
entry (:mod:`.binding`) that the rubric, the LLM judge, curation and the browser all call.
"""
