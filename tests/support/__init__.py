"""The suite's shared fakes and builders: one home, imported as ``support.<name>``."""
