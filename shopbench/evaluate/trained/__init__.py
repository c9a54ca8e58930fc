"""A trained model evaluated against a baseline (``shopbench distill eval``): the run, the
table with its intervals and paired differences, the contamination line, the report."""
