"""`shopbench traces annotate` and `shopbench traces annotations`: a person's signed labels.

An annotation is signed with the annotator's hotkey, the wallet named as the neurons name
theirs (``--wallet.name``, ``--wallet.hotkey``, ``--wallet.path``; the defaults are
``template.base.config.WalletConfig``'s), and appended to
``<root>/_annotations/<hotkey>.jsonl`` (:mod:`shopbench.archive.annotations`); the archive's
shards and manifests are never touched. Listing verifies every line with the hotkey
verifier and names each line it does not show; a line repeating an annotation already read
is listed once (the count of repeats said on stderr), and past the cap on one annotator's
annotations of one episode they are listed as ``withheld``, as the trace service withholds
them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from shopbench.archive.annotations.model import LABELS, MAX_NOTE_CHARS
from shopbench.archive.errors import AnnotationRefused
from shopbench.commands.blocks import json_option
from shopbench.commands.flags import Flags
from shopbench.traces.annotations import AnnotationSettings

_SETTINGS = Flags(AnnotationSettings)


def _root() -> Any:
    """``--root DIR``: the archive annotated."""
    return typer.Option(
        ..., "--root", help="archive root (the store's directory, or a pulled folder)"
    )


def _signer(name: str | None, hotkey: str | None, path: str | None) -> Any:
    """The hotkey signer of the wallet named (unset parts: the neurons' defaults)."""
    from template.base.config import WalletConfig
    from template.base.neuron import load_wallet
    from template.signing import HotkeySigner

    given = {k: v for k, v in (("name", name), ("hotkey", hotkey), ("path", path)) if v}
    return HotkeySigner.from_wallet(load_wallet(WalletConfig(**given)))


def _verifier() -> Any:
    from template.signing import HotkeyVerifier

    return HotkeyVerifier()


def annotate_command(
    root: Path = _root(),
    episode: str = typer.Option(..., "--episode", help="the episode's id"),
    turn: int | None = typer.Option(
        None, "--turn", help="the assistant turn (1 is the first); none: the whole episode"
    ),
    label: str | None = typer.Option(
        None, "--label", help=f"{', '.join(LABELS)}, or another short slug"
    ),
    note: str = typer.Option(
        "", "--note", help=f"free text (at most {MAX_NOTE_CHARS:,} characters)"
    ),
    retract: str | None = typer.Option(
        None, "--retract", help="withdraw your annotation with this id (a new line, no edit)"
    ),
    wallet_name: str | None = typer.Option(None, "--wallet.name", help="wallet (coldkey) name"),
    wallet_hotkey: str | None = typer.Option(
        None, "--wallet.hotkey", help="hotkey name in the wallet: the annotator's key"
    ),
    wallet_path: str | None = typer.Option(None, "--wallet.path", help="directory of wallets"),
) -> None:
    """Sign a label (and note) on an episode or one of its turns, stored beside the archive."""
    from shopbench.archive.annotations.append import append_annotation
    from shopbench.archive.annotations.model import RETRACT, annotate
    from shopbench.archive.annotations.read import read_annotations
    from shopbench.traces.annotations import records_by_id

    if (label is None) == (retract is None):
        raise typer.BadParameter("give --label, or --retract ID", param_hint="--label")
    t = records_by_id(root, [episode]).get(episode)
    if t is None:
        raise AnnotationRefused(f"--episode {episode}: no such episode under {root}")
    signer = _signer(wallet_name, wallet_hotkey, wallet_path)
    if retract is not None:
        mine = read_annotations(root, _verifier(), annotators=[signer.hotkey]).of(episode)
        if not any(a.id == retract for a in mine):
            raise AnnotationRefused(
                f"--retract {retract}: no live annotation of {signer.hotkey} on {episode} "
                "has this id (see `shopbench traces annotations --episode ...`)"
            )
    a = annotate(t, signer, label=label or RETRACT, note=note, turn=turn, retracts=retract)
    path = append_annotation(root, a)
    where = f"turn {turn} of {episode}" if turn else episode
    typer.echo(f"annotated {where}: {a.label} (id {a.id}) by {a.annotator} in {path}")


def annotations_command(
    root: Path = _root(),
    episode: str | None = typer.Option(None, "--episode", help="only this episode's"),
    annotator: list[str] = typer.Option([], "--annotator", help="only this hotkey's (repeat)"),
    as_json: bool = json_option("one object instead of a table"),
    max_per_annotator: int = _SETTINGS.option("max_per_annotator", "--max-per-annotator"),
) -> None:
    """List the annotations, each verified; lines that fail are named on stderr (exit 1)."""
    from shopbench.archive.annotations.read import read_annotations
    from shopbench.traces.annotations import bound, records_by_id

    settings = AnnotationSettings(max_per_annotator=max_per_annotator)
    read = read_annotations(root, _verifier(), annotators=annotator)
    problems = [str(p) for p in read.problems]
    if read.more_problems:
        problems.append(f"... and {read.more_problems:,} more lines not shown")
    gone = read.retracted()
    chosen = [a for a in read.annotations if episode is None or a.episode_id == episode]
    records = records_by_id(root, [a.episode_id for a in chosen])
    rows: list[dict[str, Any]] = []
    for a in chosen:
        t = records.get(a.episode_id)
        if t is None:
            state = "no record"
            problems.append(f"annotation {a.id}: episode {a.episode_id} is not in {root}")
        else:
            kept, why = bound([a], t)
            problems.extend(why)
            state = ("retraction" if a.retracts else "retracted" if a.id in gone
                     else "shown" if kept else "unbound")  # fmt: skip
        rows.append({"id": a.id, "state": state, **a.model_dump(mode="json")})
    _withhold(rows, chosen, settings.max_per_annotator)
    repeats = [f"{where}: {n:,} lines repeat an annotation already read (listed once)"
               for where, n in sorted(read.repeats.items())]  # fmt: skip
    if as_json:
        answer = {"annotations": rows, "problems": problems, "repeats": read.repeats}
        typer.echo(json.dumps(answer, ensure_ascii=False))
    else:
        _print(rows)
    for line in repeats + problems:
        typer.echo(line, err=True)
    if problems:
        raise typer.Exit(1)


def _withhold(rows: list[dict[str, Any]], chosen: list[Any], limit: int) -> None:
    """Mark ``withheld`` the shown rows past `limit` of one annotator on one episode."""
    from shopbench.traces.annotations import withheld_ids

    shown = [(r["id"], a) for r, a in zip(rows, chosen, strict=True) if r["state"] == "shown"]
    past = withheld_ids(shown, limit)
    for r in rows:
        if r["id"] in past:
            r["state"] = "withheld"


def _print(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    view = Table("id", "episode", "turn", "label", "state", "annotator", "created", "note",
                 title=f"{len(rows)} annotations")  # fmt: skip
    for r in rows:
        # the note is a person's text: added as plain cells, never read as rich markup
        view.add_row(r["id"], r["episode_id"], str(r["turn"] or ""), r["label"], r["state"],
                     r["annotator"], r["created_at"][:19], r["note"][:80])  # fmt: skip
    Console(width=200, markup=False).print(view)


def register(traces_app: typer.Typer) -> None:
    """Add ``annotate`` and ``annotations`` to the ``traces`` group."""
    traces_app.command("annotate")(annotate_command)
    traces_app.command("annotations")(annotations_command)
