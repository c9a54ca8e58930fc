"""Paths a source names are data, never paths: the one check every reader applies.

A source (a bucket, a folder, another instance's HTTP mirror) names files in its listing,
in its manifests and in its object keys. None of those names is ever joined under a local
folder until :func:`shard_path` has accepted it as one of the archive's own partition paths
—``validator=<hotkey>/date=<YYYY-MM-DD>/intent=<intent>/<name>.parquet``, plain ASCII, no
empty, ``.`` or ``..`` segment, no absolute or drive path, no backslash, at most
:data:`MAX_PATH_CHARS` characters— and :func:`inside` has then confirmed that the joined
path, links resolved, stays under the folder. A name that fails is reported in the form
:func:`shown` gives it (escaped, cut), and nothing is written for it. Where no link may be
met at all (what a pull writes, what it reads from a local source folder), :func:`first_link`
finds one without following it.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

from shopbench.archive.errors import UnsafePath

MAX_PATH_CHARS = 512
"""The longest shard path an archive holds (a hotkey is 48 characters)."""

SHARD_PATH = re.compile(
    r"validator=[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
    r"/date=[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"/intent=[a-z][a-z_]{0,31}"
    r"/[A-Za-z0-9][A-Za-z0-9_.-]{0,199}\.parquet"
)
"""The relative path of a sealed shard under an archive root (the store's partition tree):
ASCII throughout (``[0-9]``, never ``\\d``, which also matches digits of other scripts)."""

HOTKEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""What a validator's hotkey looks like where it becomes a folder or a file name."""


def shown(name: str, limit: int = 160) -> str:
    """`name` as a report may print it: ASCII escapes for anything else, cut at `limit`."""
    text = ascii(name[: limit + 1])[1:-1]
    return text if len(name) <= limit else text[:limit] + "…"


def shard_path(name: str) -> str:
    """`name` itself when it is a shard path of the partition tree; UnsafePath otherwise."""
    if len(name) > MAX_PATH_CHARS:
        raise UnsafePath(f"{shown(name)}: longer than {MAX_PATH_CHARS} characters")
    segments = name.split("/")
    if any(s in ("", ".", "..") for s in segments) or "\\" in name or ":" in segments[0]:
        raise UnsafePath(f"{shown(name)}: not a plain relative path")
    if not SHARD_PATH.fullmatch(name) or any(s.startswith(".") for s in segments):
        raise UnsafePath(
            f"{shown(name)}: not a shard path "
            "(validator=<hotkey>/date=<YYYY-MM-DD>/intent=<intent>/<name>.parquet)"
        )
    return name


def validator_name(hotkey: str) -> str:
    """`hotkey` itself when it can name a folder or file; UnsafePath otherwise."""
    if not HOTKEY.fullmatch(hotkey):
        raise UnsafePath(f"{shown(hotkey)}: not a validator hotkey")
    return hotkey


def inside(root: Path, relative: str) -> Path:
    """``root / relative`` after confirming it stays under `root` with links resolved
    (`relative` is one of the archive's own paths, already checked by its kind's function,
    or a path built from such); UnsafePath when it would leave `root`."""
    base = root.resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise UnsafePath(f"{shown(relative)}: resolves outside {root}")
    return root / relative


def partition_of_path(path: str) -> dict[str, str]:
    """``{"validator": …, "date": …, "intent": …}`` from a shard path's folders."""
    out: dict[str, str] = {}
    for part in path.split("/")[:-1]:
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value
    return out


def first_link(root: Path, relative: str) -> Path | None:
    """The first part of ``root / relative`` below `root` that is a symbolic link, each part
    examined with ``lstat`` (never followed), or None. A part that does not exist ends the
    walk: nothing below it exists to be a link. `root` itself is not examined (the caller
    chose it)."""
    here = root
    for part in PurePosixPath(relative).parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(mode):
            return here
    return None
