#!/usr/bin/env bash
# Creates .venv-lucene: Pyserini 0.22.1 (Lucene BM25, Anserini jars that run on OpenJDK 17)
# for `shopbench bench relevance`. It is its own virtual environment, never a dependency of
# shopbench or its tests: the bench runs shopbench/bench/lucene_search.py with this python.
#
#   bash scripts/lucene_env.sh            # creates .venv-lucene in the repository root
#   LUCENE_VENV=/some/dir bash scripts/lucene_env.sh
#
# Needs a JDK 17 (Debian 12: apt install openjdk-17-jdk-headless): pyjnius compiles against
# it. torch is installed first, the CPU build, so that no resolver pulls a CUDA one.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${LUCENE_VENV:-.venv-lucene}
PYTHON=${PYTHON:-python3}
if [ -z "${JAVA_HOME:-}" ]; then
  for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-17-openjdk-arm64; do
    if [ -d "$jdk" ]; then JAVA_HOME=$jdk; break; fi
  done
fi
if [ -z "${JAVA_HOME:-}" ] || [ ! -x "$JAVA_HOME/bin/javac" ]; then
  echo "no JDK 17 found: set JAVA_HOME (Debian: apt install openjdk-17-jdk-headless)" >&2
  exit 1
fi
export JAVA_HOME

"$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip install --quiet"
# The CPU build of torch first: pyserini's own requirements would otherwise pull CUDA.
$PIP "torch==2.13.0"
# pyjnius reaches the JVM through JAVA_HOME (and compiles against it where no wheel fits).
$PIP "pyjnius>=1.6" cython
# BM25 search needs pyserini, pyjnius and the packages pyserini's modules import at load
# time; the dense, learned-sparse and reranking stacks (nmslib, lightgbm, spacy, openai,
# tiktoken, ...) are left out, so pyserini itself goes in without its declared dependencies.
$PIP "numpy<2" "pandas<3" scipy scikit-learn tqdm pyyaml "faiss-cpu>=1.7" \
  "transformers>=4.30,<5" sentencepiece onnxruntime
$PIP --no-deps "pyserini==0.22.1"
"$VENV/bin/python" -c 'from pyserini.search.lucene import LuceneSearcher; print("pyserini ok")'
