"""The claim as one command: arena traces → curation arms → SFT → training → evaluation
against the base model on the same held-out tasks (``shopbench distill experiment``)."""
