"""The one registry idiom: every extension point of shopbench is a :class:`Registry`.

A registry holds entries by name, in order (the order every listing shows them). An entry may
have aliases (older names still read), tags (a policy's group) and a place given at
registration (``register(entry, before="x")`` or ``after="x"``). Looking up a name that is
not there raises the registry's error naming every name that is, and the forms it accepts
besides (``also``: ``openai:MODEL@URL``, a prefix its owner routes before asking). A registry
is a read-only :class:`~collections.abc.Mapping` of name to entry, so ``for name in r``,
``r.items()`` and ``name in r`` (an alias too) read it as any mapping.

Where the entries are modules that import what reads the registry (the task intents), the
registry is given a ``load`` function: it is called on first use, its entries registered
first, in its order.

The registries: intents (:mod:`shopbench.tasks.intent_registry`), curation rules
(:mod:`shopbench.curation.rules`), export formats (:mod:`shopbench.traces.formats`),
policies (:mod:`shopbench.agents.registry`), judges (:mod:`shopbench.judging.registry`),
RL environments (:mod:`shopbench.distill.rl.environment`), tool packs
(:mod:`shopbench.packs.pack`) and their handlers (:mod:`shopbench.env.packs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TypeVar, overload

from shopbench.errors import RegistryError

T = TypeVar("T")
D = TypeVar("D")


class Registry(Mapping[str, T]):
    """Entries by name, in order, with aliases, tags and ``before=`` / ``after=`` places.

    `kind` names an entry in messages ("intent", "export format"). `key` gives an entry's
    own name, for entries that carry one (registered without ``name=``), and `aliases_of` the
    aliases an entry declares (registered besides any ``aliases=``). `error` is what
    every refusal raises (an unknown name, a name taken, a neighbour unknown), with one line
    saying why. `also` says what else the registry's owner accepts where a name goes, for
    the unknown-name message. `reserved` are names no entry may take. `load` gives the
    entries registered on first use (see the module doc).
    """

    def __init__(
        self,
        kind: str,
        *,
        key: Callable[[T], str] | None = None,
        aliases_of: Callable[[T], Iterable[str]] | None = None,
        error: Callable[[str], Exception] = RegistryError,
        also: str = "",
        reserved: Iterable[str] = (),
        load: Callable[[], Iterable[T]] | None = None,
    ) -> None:
        self.kind = kind
        self.error = error
        self.also = also
        self._key = key
        self._aliases_of = aliases_of
        self._reserved = frozenset(reserved)
        self._load = load
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._tags: dict[str, frozenset[str]] = {}

    # -- adding and removing -----------------------------------------------------------------

    def register(
        self,
        entry: T,
        *,
        name: str | None = None,
        aliases: Iterable[str] = (),
        tags: Iterable[str] = (),
        before: str | None = None,
        after: str | None = None,
    ) -> T:
        """Add `entry` under `name` (default: its own name, by `key`), known also by
        `aliases` (and those it declares, by `aliases_of`) and tagged `tags`, at the end, or
        just before or after the entry named; `entry` back. The registry's error for a name or
        alias taken or reserved, an unknown neighbour, or both neighbours given."""
        self._ensure()
        own = self._name_of(entry, name)
        at = self.position(before=before, after=after)
        aliases = (*(self._aliases_of(entry) if self._aliases_of else ()), *aliases)
        new = (own, *aliases)
        for taken in new:
            if taken in self._reserved:
                raise self.error(f"{self.kind} name {taken!r} is reserved")
            if taken in self._entries or taken in self._aliases:
                raise self.error(f"{self.kind} {taken!r} is already registered")
        if len(set(new)) != len(new):
            raise self.error(f"{self.kind} {own!r}: an alias repeats a name")
        self.admit(own, entry, at)
        items = list(self._entries.items())
        items.insert(at, (own, entry))
        self._entries.clear()
        self._entries.update(items)
        self._aliases.update(dict.fromkeys(aliases, own))
        self._tags[own] = frozenset(tags)
        return entry

    def admit(self, name: str, entry: T, at: int) -> None:
        """Raise to refuse `entry` as `name` at index `at` (a kind of entry's own checks,
        made after the name's); this one admits everything."""

    def unregister(self, name: str) -> T:
        """Remove the entry `name` (or the entry an alias names) with its aliases; the entry.
        The registry's error naming the entries when there is none."""
        own = self.canonical(name)
        for alias in [a for a, n in self._aliases.items() if n == own]:
            del self._aliases[alias]
        del self._tags[own]
        return self._entries.pop(own)

    def position(self, *, before: str | None = None, after: str | None = None) -> int:
        """The index an entry registered with these neighbours would take (the end when
        neither is given); the registry's error for an unknown neighbour or both given."""
        self._ensure()
        if before is not None and after is not None:
            raise self.error(f"register a {self.kind} before one or after one, not both")
        if before is not None:
            return self.index(before)
        if after is not None:
            return self.index(after) + 1
        return len(self._entries)

    # -- reading -----------------------------------------------------------------------------

    def canonical(self, name: str) -> str:
        """The registered name `name` stands for (itself, or what it is an alias of); the
        registry's error naming what exists when it is neither."""
        self._ensure()
        if name in self._entries:
            return name
        if name in self._aliases:
            return self._aliases[name]
        raise self.error(self.unknown(name))

    def lookup(self, name: str) -> T:
        """The entry `name` (or an alias) stands for; the registry's error naming what
        exists when there is none."""
        own = self.canonical(name)  # first: it may load the entries
        return self._entries[own]

    def __getitem__(self, name: str) -> T:
        return self.lookup(name)

    @overload
    def get(self, name: str, /) -> T | None: ...

    @overload
    def get(self, name: str, /, default: T | D) -> T | D: ...

    def get(self, name: str, /, default: object = None) -> object:
        """The entry `name` (or an alias) stands for, else `default`."""
        self._ensure()
        return self._entries.get(self._aliases.get(name, name), default)

    def __contains__(self, name: object) -> bool:
        self._ensure()
        return name in self._entries or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        self._ensure()
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        self._ensure()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"

    def index(self, name: str) -> int:
        """The entry's place in the order, from 0; the registry's error naming what exists."""
        own = self.canonical(name)  # first: it may load the entries
        return list(self._entries).index(own)

    def names(self, tag: str | None = None) -> tuple[str, ...]:
        """The entries' names in order (aliases left out); those tagged `tag` if given."""
        self._ensure()
        return tuple(n for n in self._entries if tag is None or tag in self._tags[n])

    def tagged(self, tag: str) -> Mapping[str, T]:
        """The entries tagged `tag`, in order, as a read-only mapping (a snapshot)."""
        return MappingProxyType({n: self._entries[n] for n in self.names(tag)})

    def tags(self, name: str) -> frozenset[str]:
        """The tags of the entry `name` (or an alias) was registered with."""
        own = self.canonical(name)  # first: it may load the entries
        return self._tags[own]

    def aliases(self) -> dict[str, str]:
        """Every alias with the name it stands for, in the order they were registered."""
        self._ensure()
        return dict(self._aliases)

    def unknown(self, name: str) -> str:
        """The message for a name that is not registered: the name, every name that is (in
        order) and what else is accepted."""
        self._ensure()
        allowed = ", ".join(self._entries) or "none registered"
        also = f", or {self.also}" if self.also else ""
        return f"unknown {self.kind} {name!r}; allowed: {allowed}{also}"

    # -- inside ------------------------------------------------------------------------------

    def _name_of(self, entry: T, name: str | None) -> str:
        if name is not None:
            return name
        if self._key is None:
            raise self.error(f"a {self.kind} is registered with its name (name=...)")
        return self._key(entry)

    def _ensure(self) -> None:
        """Register the `load` function's entries, once, before anything else is read."""
        load, self._load = self._load, None
        if load is None:
            return
        try:
            for entry in load():
                self.register(entry)
        except BaseException:
            self._entries.clear()
            self._aliases.clear()
            self._tags.clear()
            self._load = load
            raise


def declared_in(
    package: str, names: Iterable[str], attribute: str, key: Callable[[T], str], *,
    kind: str, error: type[Exception] = RegistryError,
) -> list[T]:  # fmt: skip
    """The built-in entries a registry loads on first use: for each of `names`, the
    `attribute` of the module of that name in `package` (``shopbench.tasks.intents.product``'s
    ``SPEC``); `error` when a module declares an entry of another name."""
    import importlib

    entries: list[T] = []
    for name in names:
        entry: T = getattr(importlib.import_module(f"{package}.{name}"), attribute)
        if key(entry) != name:
            raise error(f"{package}.{name} declares the {kind} {key(entry)!r}, not {name!r}")
        entries.append(entry)
    return entries
