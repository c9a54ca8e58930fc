"""The arena's environment as TRL's ``environment_factory`` wants it: one per rollout.

TRL 1.16's ``GRPOTrainer(environment_factory=...)`` builds environment instances, calls
``reset(**row)`` before each rollout (its return is appended to the last prompt message),
exposes every public method of the class as a tool, and hands the instances to the reward
functions. :class:`ShopbenchEnvironment` is that over :class:`~shopbench.env.env.ShoppingEnv`:

* ``reset`` opens an episode for the row's task with the row's episode key, so every
  rollout of a group (TRL repeats a row ``num_generations`` times) starts from one state:
  the same task, the same tokens for the same products;
* each tool method is generated from :class:`~shopbench.env.tools.ShopTools` (its name,
  signature, docstring and type hints) and delegates to :meth:`Episode.call
  <shopbench.env.episode.Episode.call>`: the toolkit's validation, limits, errors and
  rendering are the arena's, there is no second implementation of a tool;
* ``outcome`` grades the recommendation with :meth:`ShoppingEnv.grade
  <shopbench.env.env.ShoppingEnv.grade>`, the validator's grader; ``viewed_slots`` is the
  share of the task's slots that a product the agent viewed satisfies (the dense term).

The catalog and its index open once per process (:func:`shared_env`, keyed by path); an
instance pickles to its catalog path, its row and the calls made so far, and unpickles by
replaying them on a fresh episode with the same key (the tokens derive from the key, so the
state is the same). Non-tool state is exposed as properties and underscore methods only,
since TRL would offer any other public method to the model.
"""

from __future__ import annotations

import inspect
import threading
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shopbench.distill.errors import RLDataError, RLError
from shopbench.env.env import ShoppingEnv
from shopbench.env.tools import ShopTools, tool_method
from shopbench.errors import first_problem
from shopbench.packs.shopper import PACK as SHOPPER
from shopbench.packs.web_search import PACK as WEB_SEARCH
from shopbench.records.tools import Tool
from shopbench.registry import Registry
from shopbench.tasks.intent_registry import intent_spec, intent_specs
from shopbench.tasks.model import Task

if TYPE_CHECKING:
    from shopbench.env.episode import Episode
    from shopbench.records.outcome import Outcome

_ENVS: dict[str, ShoppingEnv] = {}
_ENVS_LOCK = threading.Lock()


def shared_env(catalog_dir: str | Path) -> ShoppingEnv:
    """The process's one :class:`ShoppingEnv` over the catalog at `catalog_dir` (opened on
    first use, then reused by every environment instance of every rollout)."""
    key = str(Path(catalog_dir).resolve())
    with _ENVS_LOCK:
        env = _ENVS.get(key)
        if env is None:
            env = _ENVS[key] = ShoppingEnv.open(key)
        return env


def _delegate(name: str) -> Callable[..., str]:
    """A method that runs the tool `name` in the current episode, with the signature,
    docstring and type hints of the tool's declaring method (so TRL derives its schema from
    them)."""
    original = tool_method(name)

    def method(self: ShopbenchEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    method.__name__ = name
    method.__qualname__ = f"ShopbenchEnvironment.{name}"
    method.__doc__ = original.__doc__
    method.__signature__ = inspect.signature(original).replace(  # type: ignore[attr-defined]
        return_annotation=str
    )
    method.__annotations__ = {**typing.get_type_hints(original), "return": str}
    return method


class ShopbenchEnvironment:
    """One rollout's shopping episode, for TRL's ``environment_factory`` (see the module).

    The tools are those of product, shop and voucher tasks; :class:`KnowledgeEnvironment`
    adds ``web_search`` for knowledge tasks, as the arena offers it only there.
    """

    extra_tools: typing.ClassVar[frozenset[str]] = frozenset()
    """The tools it offers besides every task's: it plays the intents declaring exactly these."""

    find_product = _delegate(Tool.FIND_PRODUCT)
    view_product_information = _delegate(Tool.VIEW_PRODUCT_INFORMATION)
    recommend_product = _delegate(Tool.RECOMMEND_PRODUCT)
    terminate = _delegate(Tool.TERMINATE)

    def __init__(self, catalog: str | Path) -> None:
        self._catalog = str(catalog)
        self._env = shared_env(catalog)
        self._task: Task | None = None
        self._key: bytes | None = None
        self._episode: Episode | None = None
        self._calls: list[tuple[int, str, dict[str, Any]]] = []
        self._turn_pending = False
        self._outcome: Outcome | None = None

    # -- TRL's contract --------------------------------------------------------------------

    def reset(self, task: str | None = None, episode_key: str | None = None, **row: Any) -> str:
        """Open the episode of the row's `task` (a task as JSON) played with `episode_key`
        (hex); return the task's query, which TRL appends to the empty user message."""
        self._open(parse_row_task(task), _key_bytes(episode_key))
        self._calls = []
        return self.task.query

    @classmethod
    def tool_names(cls) -> list[str]:
        """The tools this class offers, in ShoppingBench's order."""
        return [n for n in ShopTools.tool_specs() if inspect.isfunction(getattr(cls, n, None))]

    @classmethod
    def schemas(cls) -> list[dict[str, Any]]:
        """The OpenAI schemas of :meth:`tool_names`: the toolkit's, exactly as the arena sends
        them to a miner."""
        specs = ShopTools.tool_specs()
        return [specs[n].openai_schema() for n in cls.tool_names()]

    # -- state for the rewards (properties: TRL offers public methods as tools) ------------

    @property
    def task(self) -> Task:
        """The task of the current rollout (RLError before :meth:`reset`)."""
        if self._task is None:
            raise RLError("the environment has not been reset with a task yet")
        return self._task

    @property
    def episode(self) -> Episode:
        """The current rollout's episode: its tool log, recommendation and tokens."""
        if self._episode is None:
            raise RLError("the environment has not been reset with a task yet")
        return self._episode

    @property
    def catalog_dir(self) -> str:
        """The catalog this environment plays in."""
        return self._catalog

    @property
    def outcome(self) -> Outcome:
        """The validator's grade of what the rollout recommended (computed once per rollout)."""
        if self._outcome is None:
            episode = self.episode
            ids = [episode.resolve(t) if t else None for t in episode.recommended]
            self._outcome = self._env.grade(self.task, ids, episode.dialogue())
        return self._outcome

    @property
    def viewed_slots(self) -> float:
        """Share of the task's slots satisfied (rule score 1; for a knowledge task, success)
        by some product the rollout opened with a successful view_product_information."""
        from shopbench.outcome.grader import grade_slot

        episode, task = self.episode, self.task
        tokens = [
            t.strip()
            for r in episode.log
            if r.name == Tool.VIEW_PRODUCT_INFORMATION and r.error is None
            and isinstance(r.arguments, dict)
            for t in str(r.arguments.get("product_ids", "")).split(",")
        ]  # fmt: skip
        ids = list(dict.fromkeys(i for i in (episode.resolve(t) for t in tokens if t) if i))
        products = [p for p in self._env.catalog.get(ids) if p is not None]
        if task.rules.answer:
            hit = any(self._env.grade(task, [p.product_id]).success for p in products)
            return 1.0 if hit else 0.0
        matcher = self._env.matcher
        satisfied = sum(
            any(grade_slot(slot, p, matcher).rule_score >= 1.0 for p in products)
            for slot in task.reward
        )
        return satisfied / len(task.reward)

    @property
    def env(self) -> ShoppingEnv:
        """The shared shopping environment (catalog, grader) behind this instance."""
        return self._env

    # -- the trainer's hook and the tools' one path ----------------------------------------

    def _begin_turn(self) -> None:
        """Called by the trainer before each generation: the next tool call opens a turn."""
        self._turn_pending = True

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        episode = self.episode
        if self._turn_pending:
            self._turn_pending = False
            episode.begin_turn()
        self._outcome = None
        self._calls.append((episode.turn, name, dict(arguments)))
        return episode.call(name, arguments).content

    def _open(self, task: Task, key: bytes) -> None:
        if task.intent not in plays(type(self)):
            raise RLDataError(
                f"task {task.id!r} is a {task.intent} task; {type(self).__name__} plays "
                f"{', '.join(plays(type(self)))} tasks"
            )
        self._task, self._key = task, key
        self._episode = self._env.new_episode(task, key=key)
        self._turn_pending = False
        self._outcome = None

    # -- pickling (TRL's async trainer ships environments to its rollout worker) -----------

    def __getstate__(self) -> dict[str, Any]:
        return {
            "catalog": self._catalog,
            "task": self._task.model_dump_json() if self._task is not None else None,
            "key": self._key,
            "calls": list(self._calls),
            "turn_pending": self._turn_pending,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["catalog"])  # type: ignore[misc]
        if state["task"] is None:
            return
        self._open(Task.model_validate_json(state["task"]), state["key"])
        episode = self.episode
        for turn, name, arguments in state["calls"]:
            while episode.turn < turn:
                episode.begin_turn()
            episode.call(name, arguments)
        self._calls = list(state["calls"])
        self._turn_pending = state["turn_pending"]


class KnowledgeEnvironment(ShopbenchEnvironment):
    """:class:`ShopbenchEnvironment` for knowledge tasks: the same tools and ``web_search``."""

    extra_tools: typing.ClassVar[frozenset[str]] = frozenset(WEB_SEARCH.tools)

    web_search = _delegate(Tool.WEB_SEARCH)


class ClarifyEnvironment(ShopbenchEnvironment):
    """:class:`ShopbenchEnvironment` for clarify tasks: the same tools and ``ask_shopper``."""

    extra_tools: typing.ClassVar[frozenset[str]] = frozenset(SHOPPER.tools)

    ask_shopper = _delegate(Tool.ASK_SHOPPER)


ENVIRONMENTS: Registry[type[ShopbenchEnvironment]] = Registry("RL environment", error=RLDataError)
"""The environment of each row's ``environment`` field (TRL's multi-environment routing), by
name, the one registry idiom (:class:`shopbench.registry.Registry`); a task goes to the one
offering its intent's tools (:func:`environment_for`)."""
ENVIRONMENTS.register(ShopbenchEnvironment, name="shopping")
ENVIRONMENTS.register(KnowledgeEnvironment, name="knowledge")
ENVIRONMENTS.register(ClarifyEnvironment, name="clarify")


def plays(environment: type[ShopbenchEnvironment]) -> tuple[str, ...]:
    """The registered intents `environment` plays: those whose declared tools are its own."""
    return tuple(s.name for s in intent_specs() if s.tools == environment.extra_tools)


def environment_for(intent: str) -> str:
    """The :data:`ENVIRONMENTS` entry that plays tasks of `intent` (the one offering the
    intent's tools); RLDataError when none does."""
    tools = intent_spec(intent).tools
    for name, environment in ENVIRONMENTS.items():
        if environment.extra_tools == tools:
            return name
    raise RLDataError(f"no RL environment offers the tools of {intent} tasks: {sorted(tools)}")


def environment_name(task: Task) -> str:
    """The :data:`ENVIRONMENTS` entry that plays `task`."""
    return environment_for(task.intent)


def parse_row_task(task: Any) -> Task:
    """The task a dataset row carries (JSON text or a mapping); RLDataError when it has none
    or it is not a task."""
    from pydantic import ValidationError

    if task is None or (isinstance(task, str) and not task.strip()):
        raise RLDataError("a row without a task: every row needs a 'task' (the task as JSON)")
    try:
        if isinstance(task, str):
            return Task.model_validate_json(task)
        return Task.model_validate(task)
    except ValidationError as e:
        why = first_problem(e, default="task")
        raise RLDataError(f"a row's task is not a task: {why}") from None


def _key_bytes(text: str | None) -> bytes:
    if not text:
        raise RLDataError("a row without an episode_key: every row needs one (hex, 32 bytes)")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise RLDataError(f"episode_key {text[:20]!r}... is not hex") from None
    if len(key) < 16:
        raise RLDataError(f"episode_key has {len(key)} bytes; at least 16 are needed")
    return key
