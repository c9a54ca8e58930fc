"""shopbench: a shopping-agent arena whose graded episodes become training data."""

__version__ = "0.1.0"
