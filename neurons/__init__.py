"""The neurons' entry points: ``python neurons/validator.py`` and ``python neurons/miner.py``."""
