"""Replayable verification of an archive, as a second validator would run it.

Every archived episode's tool calls are replayed against a catalog built from the
validator's revealed seed, in a fresh episode of the same task, and the episode is graded,
judged and scored again; whatever does not come out exactly as recorded is reported by
episode and field (:mod:`shopbench.verify.run`). See docs/archive.md, "Verifying an
archive".
"""
