"""The exception families of shopbench, one per layer, documented in one place.

Every error a user can trigger derives from :class:`ShopbenchError`. Each package of
``shopbench/`` that raises errors of its own has one family: a root class in the package's own
``errors.py`` deriving from :class:`ShopbenchError`; every other exception class of the
package, its sub-packages' included, derives from that root and lives in that ``errors.py``
(``tests/house/test_errors.py`` keeps both). The outermost boundary is the CLI
(``shopbench.cli.main``), which turns every ShopbenchError into one line ``error: ...`` and
exit status 2, never a traceback; a neuron's ``main`` (``template/base/neuron.py``) does the
same at startup. The table names, for each family, the boundaries nearer the raise.

+-------------------------------+-------------------------------+----------------------------------+
| package → root (family)       | what it means                 | which boundary converts it       |
+===============================+===============================+==================================+
| ``shopbench.errors`` →        | the base of every family;     | the CLI: one line ``error:       |
| ShopbenchError;               | ImportRecordError is one      | ...``, exit status 2; ``catalog  |
| ImportRecordError;            | malformed line of an imported | import`` without ``--strict``    |
| UnreadableArguments;          | file (file and line named),   | counts and lists bad lines;      |
| RegistryError                 | shared by catalog import and  | UnreadableArguments: the         |
|                               | task files; Unreadable-       | environment, into an error       |
|                               | Arguments (a ValueError too): | observation; every reader of a   |
|                               | tool-call arguments no reader | record shows the text as sent;   |
|                               | can trust; RegistryError (a   | RegistryError: the CLI           |
|                               | KeyError too): a registry     |                                  |
|                               | (``shopbench/registry.py``)   |                                  |
|                               | refused a name: unknown,      |                                  |
|                               | taken or reserved, or an      |                                  |
|                               | unknown neighbour             |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``catalog.errors`` →          | a catalog directory, data     | the CLI; SearchError: the shop   |
| CatalogError (SearchError,    | file or search index is       | tools (``env/tools.py``) turn it |
| GeneratorError)               | missing, corrupt or of        | into the tool's error            |
|                               | another version; bad build    | observation                      |
|                               | parameters; a bad search      |                                  |
|                               | request; a generator request  |                                  |
|                               | out of range                  |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``openai_compat.errors`` →    | one failed request to an      | the episode loop records the     |
| EndpointFailure               | OpenAI-compatible endpoint,   | policy's TerminationReason (a    |
| (EndpointError,               | with its kind, whether it is  | timeout as its timeout); the     |
| EndpointTimeout,              | transient, the status         | judge's client turns it into     |
| MalformedReply)               | (EndpointTimeout is also a    | Failure                          |
|                               | TimeoutError)                 |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``outcome.errors`` →          | the outcome grader cannot     | the CLI                          |
| OutcomeError                  | grade as asked (the embedding |                                  |
| (EmbeddingModelMissing)       | matcher's package or model is |                                  |
|                               | missing)                      |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``tasks.errors`` → TaskError  | a task record, task file,     | the CLI; the validator's task    |
|                               | reward spec or generation     | bank regenerates a damaged cache |
|                               | request is invalid            |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``env.errors`` → EnvError     | the environment cannot be set | ToolError: ``Episode.call``,     |
| (ToolError: UnknownToolError, | up (episode key, system       | into an error observation, so it |
| ArgumentError,                | prompt); ToolError: a tool    | never leaves the episode;        |
| InvalidIdError, LimitError,   | call inside an episode is     | EnvError: the CLI                |
| NotAllowedError,              | invalid                       |                                  |
| EpisodeOverError)             |                               |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``agents.errors`` →           | a policy cannot be built or   | the CLI; PlayInputError:         |
| AgentError (PolicySpecError,  | played: a bad spec or         | ``shopbench play`` asks again;   |
| PolicyOptionsError,           | options, a local model        | PlayerQuit: the episode loop     |
| LocalModelError,              | directory that cannot be      | records the episode as ended by  |
| PlayInputError, PlayerQuit)   | played, a person's typed      | the policy                       |
|                               | line, a person who quit       |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``judging.errors`` →          | a judge cannot be built       | the CLI; JudgeUnavailable: the   |
| JudgeError (LLMJudgeError:    | (unknown name, a rubric that  | LLM judge answers with the       |
| JudgeSpecError,               | does not load); the LLM       | rubric's verdict and records the |
| JudgeUnavailable, Failure)    | judge's spec breaks the       | fallback                         |
|                               | release's pins, or it has no  |                                  |
|                               | verdict this time             |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``archive.errors`` →          | the archive cannot store,     | the CLI; the validator's round   |
| ArchiveError (SinkError:      | read, query or fetch          | logs a SinkError and goes on;    |
| RecordRefused, SegmentError,  | trajectories; NotFound: an id | the HTTP API: FilterError 422,   |
| RemoteError, QueryError,      | the HTTP API does not publish | NotFound 404, SinkError 503;     |
| FilterError, UnsafePath,      |                               | curation re-raises a SinkError   |
| LinkRefused, StaleHead,       | AnnotationRefused: an         | as a CurationError; the CLI says |
| UnknownValidator;             | annotation not made;          | why an annotation is refused;    |
| NotFound; AnnotationRefused;  | NotComparable: two episodes a | the HTTP API: NotComparable 422; |
| NotComparable)                | diff will not compare;        | the CLI: LinkRefused, StaleHead, |
|                               | LinkRefused: a link where a   | UnknownValidator (a pull writes  |
|                               | pull would write; StaleHead:  | nothing)                         |
|                               | a head older than asked;      |                                  |
|                               | UnknownValidator: a pull of a |                                  |
|                               | validator the source lacks    |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``arena.errors`` → ArenaError | the arena cannot run: a       | the CLI                          |
|                               | miner did not start, a bad    |                                  |
|                               | --add-miner, an unusable      |                                  |
|                               | catalog                       |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``verify.errors`` →           | a verification cannot run as  | the CLI; a record naming a       |
| VerifyError                   | asked: no archive, a catalog  | rubric version this release      |
|                               | of another seed, no source of | lacks is that episode's          |
|                               | tasks, a rubric version this  | mismatch (a mismatch is no       |
|                               | release does not package      | error: the command exits 1)      |
+-------------------------------+-------------------------------+----------------------------------+
| ``curation.errors`` →         | curation cannot run: bad      | the CLI                          |
| CurationError (EmptyResult,   | config, an unreadable archive |                                  |
| CuratedSetError)              | or truth file, an empty       |                                  |
|                               | result, a curated set of      |                                  |
|                               | another shape                 |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``distill.errors`` →          | distillation or GRPO cannot   | the CLI, before any training     |
| DistillError (NoSamplesError, | go on: bad data, a chat       | starts                           |
| TemplateError,                | template, tokenizer or config |                                  |
| TokenizerError,               | it cannot train with          |                                  |
| TrainConfigError, RLError,    |                               |                                  |
| RLDataError)                  |                               |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``evaluate.errors`` →         | an evaluation cannot run; a   | the CLI                          |
| EvalError (MetricError,       | metric or interval is         |                                  |
| IntervalError,                | undefined for its arguments;  |                                  |
| TrainingSetError,             | a training set or model is    |                                  |
| ModelEvalError)               | unusable                      |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``experiment.errors`` →       | an experiment cannot run as   | the CLI, before the stage that   |
| ExperimentError               | configured: an unknown arm,   | needs it (every curation, build  |
|                               | view or model, too few rows   | and the held-out draw run before |
|                               | for an arm, held-out tasks    | any training)                    |
|                               | that share product groups     |                                  |
|                               | with the training episodes    |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``calibration.errors`` →      | a judge calibration cannot    | the CLI                          |
| CalibrationError              | run                           |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``bench.errors`` → BenchError | a benchmark cannot run (the   | the CLI                          |
| (LuceneError)                 | Lucene side)                  |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``template.errors`` →         | subnet layer: a request to a  | the validator's round records    |
| TransportError                | miner failed, or the          | the failed turn's reason; the    |
| (TransportTimeout,            | validator's own request       | CLI                              |
| ConnectionFailed, BadStatus,  | breaks a protocol limit       |                                  |
| OversizedReply, InvalidReply, |                               |                                  |
| InvalidRequest,               |                               |                                  |
| RequestTooLarge)              |                               |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``template.errors`` →         | subnet layer: a chain read or | the miner and the validator log  |
| ChainClientError              | write failed                  | it and retry on a later step;    |
| (NotRegistered, RateLimited,  |                               | the CLI and a neuron's start     |
| ChainUnavailable,             |                               |                                  |
| InvalidChainRequest,          |                               |                                  |
| ChainRejected)                |                               |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``template`` → ClockError,    | subnet layer, one class each: | the CLI; a neuron's ``main``     |
| NeuronError, ConfigError,     | the clock, a neuron's start,  |                                  |
| StateError                    | its config, its state file    |                                  |
+-------------------------------+-------------------------------+----------------------------------+
| ``template`` internal         | signals inside one module of  | the module itself: the in-memory |
| (``Exception``):              | the subnet layer, never       | chain's dispatch; the transport  |
| DispatchError, Overloaded,    | leaving it                    | server (503, 403, 413)           |
| Forbidden, _TooLarge          |                               |                                  |
+-------------------------------+-------------------------------+----------------------------------+

``records``, ``scoring``, ``trajectory``, ``commands``, ``chat.py``, ``datafiles.py`` and
``registry.py`` have no family of their own: they raise the errors of the layers they call
(``datafiles`` the class its caller names, ``registry`` that or RegistryError) or
:class:`ShopbenchError` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import ValidationError


class ShopbenchError(Exception):
    """Base of every error shopbench raises on purpose."""


class ImportRecordError(ShopbenchError):
    """One record of an imported file is malformed; carries the file and line number."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


class RegistryError(ShopbenchError, KeyError):
    """A registry (:class:`shopbench.registry.Registry`) refused a name: one not registered
    (the message names every one that is), one taken or reserved, or an unknown neighbour.
    A KeyError too, as a mapping's missing key is; its message reads as one line."""

    def __str__(self) -> str:
        return Exception.__str__(self)


class UnreadableArguments(ShopbenchError, ValueError):
    """Tool-call arguments that are not a JSON object of finite values nested at most
    ``chat.MAX_ARGUMENTS_DEPTH`` deep (:func:`shopbench.chat.parse_arguments`); the
    message is one line saying why."""


class Problem(NamedTuple):
    """The first problem of a pydantic error, in parts, for a boundary that reports it in
    parts (a flag's usage error, a filter's refusal); :func:`first_problem` makes the line."""

    loc: tuple[str, ...]
    """Where, outermost first (``("limits", "max_turns")``); empty for the whole model."""
    message: str
    """Pydantic's message without its ``Value error, `` prefix."""
    kind: str
    """Pydantic's error type (``json_invalid``, ``missing``, ``less_than_equal``, ...)."""
    input: Any
    """The value refused (None when the error does not carry it)."""

    @property
    def field(self) -> str:
        """The top-level field; "" when the problem is the whole model's."""
        return self.loc[0] if self.loc else ""

    @property
    def given(self) -> str:
        """``, got VALUE`` for a scalar value refused (its repr), else ""."""
        if isinstance(self.input, (str, int, float)) and not isinstance(self.input, bool):
            return f", got {self.input!r}"
        return ""


def first_error(e: ValidationError) -> Problem:
    """The first problem of `e`, in parts."""
    first = e.errors(include_url=False)[0]
    return Problem(
        loc=tuple(str(p) for p in first["loc"]),
        message=str(first["msg"]).removeprefix("Value error, "),
        kind=str(first["type"]),
        input=first.get("input"),
    )


def first_problem(
    e: ValidationError,
    *,
    under: str = "",
    default: str = "",
    names: Mapping[str, str] | None = None,
    given: bool = False,
    located: bool = True,
    more: bool = False,
) -> str:
    """A pydantic error as one line, the way every boundary of shopbench states one: the first
    problem's location, dotted (under `under`; `default` when it has none), then its message
    without pydantic's ``Value error, `` prefix — ``"limits.max_turns: Input should be ..."``.

    `names` renames the location's first part (a field as its flag: ``--queries``); `given`
    adds a scalar value refused (``, got 9``); `located` False gives the message alone;
    `more` adds how many other problems there are (``(+2 more)``). The one place a
    ``ValidationError`` becomes a line of text (``tests/house/test_errors.py`` keeps it so).
    """
    problem = first_error(e)
    loc = list(problem.loc)
    if loc and names and loc[0] in names:
        loc[0] = names[loc[0]]
    where = ".".join([*([under] if under else []), *loc]) or default
    message = problem.message + (problem.given if given else "")
    if more and e.error_count() > 1:
        message += f" (+{e.error_count() - 1} more)"
    return f"{where}: {message}" if where and located else message
