"""ShoppingBench's Lucene stack beside ours: its index, built once per catalog, and its
find_product, asked over JSON lines in a subprocess running the Lucene environment's python.

The index lives in a cache directory (by default ``<catalog>.lucene`` next to the catalog):
``collection/docs.jsonl`` in ShoppingBench's document format (:mod:`.lucene_docs`), the
Lucene index Pyserini's default indexer builds from it (``index/``), and ``built.json``,
which names the catalog manifest it was built from, so a rebuilt catalog gets a new index.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from pydantic import BaseModel

from shopbench.bench.errors import LuceneError
from shopbench.bench.lucene_docs import write_collection
from shopbench.catalog.layout import MANIFEST

DOC_FORMAT = 1
"""Bumped when the collection's documents change, so that cached indexes are rebuilt."""

SEARCH_SCRIPT = Path(__file__).with_name("lucene_search.py")
_JDK = Path("/usr/lib/jvm/java-17-openjdk-amd64")
_ENV_SCRIPT = "scripts/lucene_env.sh"


class LuceneAnswer(BaseModel):
    """What the Lucene side returns for one query."""

    ids: list[str]
    scores: list[float]
    ms: float


def _env() -> dict[str, str]:
    env = dict(os.environ)
    if "JAVA_HOME" not in env and _JDK.is_dir():
        env["JAVA_HOME"] = str(_JDK)
    return env


def check_python(python: Path) -> Path:
    """The Lucene environment's python, or LuceneError saying how to create it."""
    if not python.is_file():
        raise LuceneError(
            f"{python}: no Lucene python; create it with `bash {_ENV_SCRIPT}`"
            " or name one with --lucene-python"
        )
    return python


def _fingerprint(catalog: Path) -> str:
    return hashlib.sha256((catalog / MANIFEST).read_bytes()).hexdigest()


def ensure_index(catalog: Path, work: Path, python: Path) -> Path:
    """The Lucene index of `catalog` under `work`, built first unless a build of this very
    catalog is there; returns the index directory."""
    check_python(python)
    marker, index = work / "built.json", work / "index"
    want = {"catalog_manifest_sha256": _fingerprint(catalog), "doc_format": DOC_FORMAT}
    try:
        if json.loads(marker.read_text()) == want and index.is_dir():
            return index
    except (OSError, json.JSONDecodeError):
        pass
    marker.unlink(missing_ok=True)
    shutil.rmtree(index, ignore_errors=True)
    collection = work / "collection"
    write_collection(catalog, collection)
    cmd = [
        str(python), "-m", "pyserini.index.lucene",
        "--collection", "JsonCollection", "--input", str(collection), "--index", str(index),
        "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1", "--storeRaw",
    ]
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise LuceneError(f"Lucene indexing of {collection} failed: " + " | ".join(tail))
    (collection / "docs.jsonl").unlink()  # as large as the catalog; the index stores the raw
    marker.write_text(json.dumps(want) + "\n")
    return index


class LuceneSearcher:
    """ShoppingBench's find_product over one Lucene index, in a subprocess; a context manager.

    Each :meth:`find` sends one request line and reads one answer line; the subprocess times
    its own search, so the figures leave out the pipe.
    """

    def __init__(self, python: Path, index: Path, k: int) -> None:
        self.k = k
        # The JVM logs freely: to a file beside the index, so no pipe can fill and block it.
        self.log = index.parent / "search.log"
        with self.log.open("w") as log:
            self._proc = subprocess.Popen(
                [str(check_python(python)), str(SEARCH_SCRIPT), str(index)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                text=True, env=_env(),
            )
        self.docs = int(self._read()["docs"])

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        return self._proc.stdin, self._proc.stdout

    def _read(self) -> dict[str, Any]:
        line = self._pipes()[1].readline()
        if not line:
            self._proc.kill()
            self._proc.wait()
            tail = self.log.read_text(errors="replace").strip()[-800:]
            raise LuceneError(f"the Lucene search process exited ({self.log}): {tail}")
        return json.loads(line)

    def find(
        self, q: str, *, shop_id: str | None, price: tuple[float | None, float | None] | None,
        service: tuple[str, ...], sort: str,
    ) -> LuceneAnswer:
        """Page 1 of ShoppingBench's find_product for these arguments."""
        request = {"q": q, "shop_id": shop_id, "price": list(price) if price else None,
                   "service": list(service), "sort": None if sort == "default" else sort,
                   "k": self.k}
        stdin = self._pipes()[0]
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        return LuceneAnswer.model_validate(self._read())

    def close(self) -> None:
        """End the subprocess (closing its input ends it; it is killed if it lingers)."""
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> LuceneSearcher:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
