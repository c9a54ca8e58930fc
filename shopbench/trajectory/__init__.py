"""Playing an episode: the one loop (``loop``), its named stop conditions (``stops``), the one
record builder (``builder``) and reading a policy's reply (``reply``); the record itself is
:mod:`shopbench.records.trajectory`."""
