"""The ledger: one small row per episode, on disk, where every drop is decided and counted.

The first pass over the archive appends each episode's summary (ids, what the per-episode
rules said, the narrator's signals, the call skeleton, the reply fingerprint, the decision
key, whether its claims are refuted, the MinHash signature, recovery tags) to a DuckDB
table in a file under the output folder; the rules that compare episodes then run as SQL
over it, in pipeline order, each charging its drops to itself with a reason. DuckDB spills
to disk under its memory limit, so memory stays flat however large the archive. The second
pass reads the kept rows back in archive order.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pyarrow as pa

from shopbench.curation.config import CurateConfig
from shopbench.curation.errors import CurationError
from shopbench.curation.similarity import bands_for

EPISODE_RULES = ("validity", "contamination", "outcome", "judge")
"""Rules decided in the first pass, each with a reason column ``r_<rule>``."""

LEDGER_SCHEMA = pa.schema([
    ("seq", pa.int64()),
    ("episode_id", pa.string()),
    ("miner", pa.string()),
    ("uid", pa.int64()),
    ("block", pa.int64()),
    ("task_id", pa.string()),
    ("cluster", pa.string()),
    ("intent", pa.string()),
    ("score", pa.float64()),
    ("success", pa.bool_()),
    ("failure", pa.string()),
    ("turns", pa.int64()),
    ("policy", pa.string()),
    ("honest", pa.bool_()),
    ("r_validity", pa.string()),
    ("r_contamination", pa.string()),
    ("contaminated_by", pa.list_(pa.string())),
    ("r_outcome", pa.string()),
    ("r_judge", pa.string()),
    ("r_loops", pa.string()),
    ("narrator_base", pa.float64()),
    ("narrator_why", pa.string()),
    ("skeleton", pa.string()),
    ("fingerprint", pa.string()),
    ("decision", pa.string()),
    ("searches", pa.list_(pa.string())),
    ("started", pa.float64()),
    ("claimed", pa.bool_()),
    ("refuted", pa.string()),
    ("sig", pa.list_(pa.int64())),
    ("weight", pa.float64()),
    ("tags", pa.list_(pa.string())),
    ("mask", pa.list_(pa.bool_())),
])  # fmt: skip

_LIVE = "drop_rule IS NULL"
_DUPLICATES = pa.schema([
    ("seq", pa.int64()), ("of_miner", pa.string()), ("of_episode", pa.string()),
    ("why", pa.string()), ("miner", pa.string()), ("episode_id", pa.string()),
])  # fmt: skip


class Ledger:
    """The per-episode table of one curation run (a DuckDB file in `work`)."""

    def __init__(self, work: Path, *, memory_limit: str = "512MB") -> None:
        import duckdb

        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.path = work / "ledger.duckdb"
        self.path.unlink(missing_ok=True)
        self.db = duckdb.connect(str(self.path))
        self.db.execute(f"SET memory_limit = '{memory_limit}'")
        self.db.execute("SET threads = 1")
        spill = str(work / "spill").replace("'", "''")
        self.db.execute(f"SET temp_directory = '{spill}'")
        self.db.execute("SET preserve_insertion_order = true")
        self._created = False

    def close(self) -> None:
        """Close the database and remove its folder."""
        self.db.close()
        shutil.rmtree(self.work, ignore_errors=True)

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append episode rows (dicts of :data:`LEDGER_SCHEMA`'s fields)."""
        if not rows:
            return
        batch = pa.Table.from_pylist(rows, schema=LEDGER_SCHEMA)  # noqa: F841 (read by DuckDB)
        if not self._created:
            self.db.execute("CREATE TABLE ep AS SELECT * FROM batch")
            self.db.execute("ALTER TABLE ep ADD COLUMN drop_rule VARCHAR")
            self.db.execute("ALTER TABLE ep ADD COLUMN drop_reason VARCHAR")
            self.db.execute("ALTER TABLE ep ADD COLUMN narrator_score DOUBLE")
            self.db.execute("ALTER TABLE ep ADD COLUMN claims_why VARCHAR")
            self._created = True
        else:
            self.db.execute("INSERT INTO ep SELECT *, NULL, NULL, NULL, NULL FROM batch")

    @property
    def empty(self) -> bool:
        """Whether no episode was appended."""
        return not self._created

    # -- the pipeline ----------------------------------------------------------------------

    def _drop(self, rule: str, where: str, reason: str, params: list[Any] | None = None) -> None:
        self.db.execute(
            f"UPDATE ep SET drop_rule = '{rule}', drop_reason = {reason} "
            f"WHERE {_LIVE} AND ({where})",
            params or [],
        )

    def _drop_from(self, rule: str, table: str) -> None:
        """Drop the live episodes listed in `table` (columns seq, why)."""
        self.db.execute(
            f"UPDATE ep SET drop_rule = '{rule}', drop_reason = t.why FROM {table} t "
            f"WHERE ep.seq = t.seq AND ep.{_LIVE}"
        )

    def run(self, cfg: CurateConfig) -> None:
        """Apply every rule in pipeline order."""
        if self.empty:
            return
        self._drop("validity", "r_validity IS NOT NULL", "r_validity")
        if cfg.contamination.enabled:
            self._drop("contamination", "r_contamination IS NOT NULL", "r_contamination")
        self._narrator(cfg)
        self._claims(cfg)
        if cfg.outcome.enabled:
            self._drop("outcome", "r_outcome IS NOT NULL", "r_outcome")
        if cfg.judge.enabled:
            self._drop("judge", "r_judge IS NOT NULL", "r_judge")
        if cfg.structure.enabled:
            self._drop("structure", "r_loops IS NOT NULL", "r_loops")
            if cfg.structure.shortest_success:
                self._shortest()
        if cfg.clones.enabled:
            self._clones(cfg)
        self.db.execute(
            "CREATE OR REPLACE TEMP TABLE dups (seq BIGINT, miner VARCHAR, of_miner VARCHAR, "
            "episode_id VARCHAR, of_episode VARCHAR)"
        )
        if cfg.duplicates.enabled:
            self._duplicates()
        if cfg.dedup.enabled:
            self._dedup(cfg)
        if cfg.caps.enabled:
            self._caps(cfg)

    def _narrator(self, cfg: CurateConfig) -> None:
        p = cfg.narrator
        floor = p.skeleton_floor
        span = max(1e-9, 1.0 - floor)
        part = f"{p.skeleton_weight} * greatest(0, (sk.share - {floor}) / {span})"
        self.db.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE sk AS
            SELECT seq, count(*) OVER (PARTITION BY miner, skeleton)::DOUBLE
                        / count(*) OVER (PARTITION BY miner) AS share,
                   count(*) OVER (PARTITION BY miner) AS n
            FROM ep WHERE r_validity IS NULL;
            UPDATE ep SET narrator_score = ep.narrator_base + CASE
                WHEN sk.n >= {p.skeleton_min_episodes}
                THEN {part} ELSE 0 END,
              narrator_why = ep.narrator_why || ', skeleton ' ||
                CASE WHEN sk.n >= {p.skeleton_min_episodes}
                THEN printf('%.2f', {part})
                     || printf(' (%d%% of the miner''s %d episodes share it)',
                               round(100 * sk.share)::INT, sk.n)
                ELSE '0 (too few episodes)' END
            FROM sk WHERE ep.seq = sk.seq;
            """
        )
        if p.enabled:
            self._drop(
                "narrator", "narrator_score >= ?",
                "printf('narrator score %.2f >= %s: ', narrator_score, ?) || narrator_why",
                [f"{p.threshold:g}", p.threshold],  # the reason's marker comes first
            )  # fmt: skip

    def _claims(self, cfg: CurateConfig) -> None:
        """Flag every valid episode of a miner (with at least `min_episodes` claiming
        episodes) whose refuted share of claims is, at `confidence`, above `honest_share`:
        the lower bound of its Wilson score interval is; drop them when the rule is on."""
        p = cfg.claims
        z = NormalDist().inv_cdf(p.confidence)
        self.db.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE cm AS
            WITH c AS (
                SELECT miner, count(*) FILTER (claimed) AS n,
                       count(*) FILTER (claimed AND refuted IS NOT NULL) AS bad
                FROM ep WHERE r_validity IS NULL GROUP BY miner)
            SELECT miner, n, bad, CASE WHEN n = 0 THEN 0.0 ELSE
                   (bad / n + {z * z} / (2 * n)
                    - {z} * sqrt(bad / n * (1 - bad / n) / n + {z * z} / (4 * n * n)))
                   / (1 + {z * z} / n) END AS low
            FROM c;
            UPDATE ep SET claims_why = printf(
                'the grader refutes the claims of %d of the miner''s %d claiming episodes '
                || '(%d%%; at %d%% confidence at least %d%% > %s%%); this one: %s',
                cm.bad, cm.n, floor(100 * cm.bad / cm.n)::INT, round(100 * {p.confidence})::INT,
                floor(100 * cm.low)::INT, '{100 * p.honest_share:g}',
                coalesce(ep.refuted, CASE WHEN ep.claimed THEN 'not refuted'
                                          ELSE 'claims nothing' END))
            FROM cm WHERE ep.miner = cm.miner AND ep.r_validity IS NULL
              AND cm.n >= {p.min_episodes} AND cm.low > {p.honest_share};
            """
        )
        if p.enabled:
            self._drop("claims", "claims_why IS NOT NULL", "claims_why")

    def _duplicates(self) -> None:
        """Of the live episodes of one task with the same decisions, keep that of the miner
        seen first (its first block, then its uid, then its first episode's start), and of
        that miner's the earliest started; drop the others naming the kept one. Decisions
        are the same when their keys are equal and, where searches are recorded
        (``compare = "decisions"``), one episode's searches contain the other's: each
        episode is compared, in that order, with the episodes of its task kept so far."""
        rows = self.rows(
            f"""
            WITH seen AS (
                SELECT miner, min(block) AS block, min(uid) AS uid, min(started) AS started
                FROM ep GROUP BY miner)
            SELECT e.seq, e.task_id, e.decision, e.searches, e.miner, e.episode_id
            FROM ep e JOIN seen s ON s.miner = e.miner
            WHERE e.{_LIVE} AND e.decision IS NOT NULL
            ORDER BY e.task_id, e.decision, s.block NULLS LAST, s.uid NULLS LAST,
                     s.started NULLS LAST, e.miner, e.started NULLS LAST, e.seq"""
        )
        dropped: list[dict[str, Any]] = []
        kept: list[tuple[Any, ...]] = []
        group: tuple[Any, Any] | None = None
        for seq, task, decision, searches, miner, episode in rows:
            if (task, decision) != group:
                group, kept = (task, decision), []
            mine = set(searches or ())
            match = next((k for k in kept if k[0] <= mine or mine <= k[0]), None)
            if match is None:
                kept.append((mine, miner, episode))
                continue
            dropped.append({
                "seq": seq, "of_miner": match[1], "of_episode": match[2],
                "why": f"same decisions as {match[2]}, kept, on this task",
                "miner": miner, "episode_id": episode,
            })  # fmt: skip
        dup_found = pa.Table.from_pylist(dropped, schema=_DUPLICATES)  # noqa: F841 (read by DuckDB)
        self.db.execute("CREATE OR REPLACE TEMP TABLE t AS SELECT * FROM dup_found")
        self.db.execute(
            "INSERT INTO dups SELECT seq, miner, of_miner, episode_id, of_episode FROM t"
        )
        self._drop_from("duplicates", "t")

    def duplicates_by_miner(self, examples: int) -> list[tuple[str, str, int, Any]]:
        """(miner, the miner whose episode was kept, count, up to `examples` pairs of the
        dropped episode's id and the kept one's) of the duplicates dropped."""
        if self.empty:
            return []
        return self.rows(
            f"""SELECT miner, of_miner, count(*) AS n,
                       list([episode_id, of_episode] ORDER BY seq)[1:{int(examples)}]
                FROM dups GROUP BY 1, 2 ORDER BY n DESC, 1, 2"""
        )

    def _shortest(self) -> None:
        self.db.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE t AS
            WITH best AS (
                SELECT seq, task_id, miner, success, first_value(seq) OVER (
                    PARTITION BY task_id, miner
                    ORDER BY success DESC, turns, seq) AS keep,
                  bool_or(success) OVER (PARTITION BY task_id, miner) AS solved
                FROM ep WHERE {_LIVE})
            SELECT b.seq, 'a shorter success of this task by this miner: ' || e.episode_id AS why
            FROM best b JOIN ep e ON e.seq = b.keep
            WHERE b.solved AND b.seq <> b.keep
            """
        )
        self._drop_from("structure", "t")

    def _clones(self, cfg: CurateConfig) -> None:
        p = cfg.clones
        self.db.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE f AS
            SELECT miner, task_id, min(fingerprint) AS fp FROM ep WHERE r_validity IS NULL
            GROUP BY miner, task_id;
            CREATE OR REPLACE TEMP TABLE first_seen AS
            SELECT miner, min(block) AS block, min(uid) AS uid FROM ep
            WHERE r_validity IS NULL GROUP BY miner;
            CREATE OR REPLACE TEMP TABLE clone_of AS
            WITH pairs AS (
                SELECT a.miner AS later, b.miner AS earlier, count(*) AS shared,
                       sum((a.fp = b.fp)::INT) AS same
                FROM f a JOIN f b ON a.task_id = b.task_id AND a.miner <> b.miner
                JOIN first_seen fa ON fa.miner = a.miner
                JOIN first_seen fb ON fb.miner = b.miner
                WHERE (fb.block, fb.uid, fb.miner) < (fa.block, fa.uid, fa.miner)
                GROUP BY 1, 2)
            SELECT later, arg_min(earlier, earlier) AS earlier, max(shared) AS shared,
                   max(same) AS same
            FROM pairs WHERE shared >= {p.min_shared_tasks}
              AND same >= {p.min_identical_share} * shared
            GROUP BY later;
            CREATE OR REPLACE TEMP TABLE t AS
            SELECT e.seq, printf('clone of miner %s (identical replies on %d of %d shared tasks)',
                                 c.earlier, c.same, c.shared) AS why
            FROM ep e JOIN clone_of c ON e.miner = c.later WHERE e.{_LIVE};
            """
        )
        self._drop_from("clones", "t")

    def _dedup(self, cfg: CurateConfig) -> None:
        p = cfg.dedup
        bands, rows = bands_for(p.permutations, p.threshold)
        self.db.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE cand AS
            WITH live AS (
                SELECT seq, coalesce(cluster, task_id) AS grp, score, sig
                FROM ep WHERE {_LIVE} AND sig IS NOT NULL),
            banded AS (
                SELECT seq, grp, score, b,
                       hash(list_slice(sig, b * {rows} + 1, (b + 1) * {rows})) AS bh
                FROM live, range({bands}) r(b)),
            ranked AS (
                SELECT seq, first_value(seq) OVER (
                    PARTITION BY grp, b, bh ORDER BY score DESC NULLS LAST, seq) AS best
                FROM banded)
            SELECT DISTINCT seq, best FROM ranked WHERE seq <> best;
            CREATE OR REPLACE TEMP TABLE t AS
            WITH sim AS (
                SELECT c.seq, c.best, b.episode_id,
                       list_sum(list_transform(range(1, {p.permutations} + 1),
                                lambda i: (a.sig[i] = b.sig[i])::INT))::DOUBLE
                           / {p.permutations} AS j
                FROM cand c JOIN ep a ON a.seq = c.seq JOIN ep b ON b.seq = c.best)
            SELECT seq, printf('near-duplicate of %s (estimated Jaccard %.2f)',
                               arg_max(episode_id, j), max(j)) AS why
            FROM sim WHERE j >= {p.threshold} GROUP BY seq;
            """
        )
        self._drop_from("dedup", "t")

    def _cap(self, column: str, limit: int, label: str) -> None:
        self.db.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE t AS
            SELECT seq, '{label} cap: ' || coalesce({column}::VARCHAR, '(none)')
                        || ' already has {limit}' AS why
            FROM (SELECT seq, {column}, row_number() OVER (
                    PARTITION BY {column} ORDER BY score DESC NULLS LAST, seq) AS rn
                  FROM ep WHERE {_LIVE})
            WHERE rn > {limit}
            """
        )
        self._drop_from("caps", "t")

    def _caps(self, cfg: CurateConfig) -> None:
        p = cfg.caps
        if p.max_per_cluster:
            self._cap("cluster", p.max_per_cluster, "cluster")
        for column, count, share in (
            ("miner", p.max_per_miner, p.max_miner_share),
            ("intent", p.max_per_intent, p.max_intent_share),
        ):
            limits = [count] if count else []
            if share:
                kept = self.kept_count()
                limits.append(max(1, math.floor(share * kept)))
            if limits:
                self._cap(column, min(limits), column)

    # -- reading it back -------------------------------------------------------------------

    def kept_count(self) -> int:
        """Episodes still kept."""
        if self.empty:
            return 0
        return int(self.db.execute(f"SELECT count(*) FROM ep WHERE {_LIVE}").fetchone()[0])

    def iter_kept(self, chunk: int = 2048) -> Iterator[tuple[int, float, list[str], Any]]:
        """(seq, weight, tags, mask) of every kept episode, in seq order, `chunk` at a time."""
        if self.empty:
            return
        cursor = self.db.cursor()
        try:
            cursor.execute(f"SELECT seq, weight, tags, mask FROM ep WHERE {_LIVE} ORDER BY seq")
            while rows := cursor.fetchmany(chunk):
                yield from rows
        finally:
            cursor.close()

    def rows(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows of a query over the ledger's ``ep`` table."""
        try:
            return self.db.execute(sql, params or []).fetchall()
        except Exception as e:  # duckdb's errors share no base class worth naming here
            raise CurationError(f"ledger query failed: {e}") from None
