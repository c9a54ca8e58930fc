"""The development chain: an in-memory subtensor the SDK's own code runs against.

- ``substrate.py`` — :class:`MemorySubstrate`, the chain behind the SDK's ``Substrate``
  protocol, built from the pallets (``pallets.py``), the storage reads (``storage.py``) and
  the state they share (``state.py``), with the fixed chain facts (``facts.py``);
- ``server.py`` — the chain served over HTTP to other processes (``shopbench chain serve``),
  every write signed in the wire format of ``wire.py``;
- ``client.py`` — :class:`RemoteMemorySubstrate`, the served chain as a ``Substrate``;
- ``admin.py`` — the development wallets and the register / show commands.
"""
