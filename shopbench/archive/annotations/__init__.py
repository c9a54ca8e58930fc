"""Annotations: a person's signed label and note on an episode, or on one turn of it: the
signed append-only log format, kept beside the store.

An annotation is stored apart from the signed record — the shards, manifests and heads are
never touched — at ``<root>/_annotations/<annotator hotkey>.jsonl``, one JSON line per
annotation, appended and fsynced (:func:`append_annotation`); a line once written is never
rewritten, and a retraction is one more annotation (label ``retract``, ``retracts`` naming
the one it withdraws), never an edit. Each annotation carries the sha256 of the signing
payload of the exact record it was made on (:func:`record_digest`), so it is bound to those
bytes, and its annotator's signature over :meth:`Annotation.signing_bytes`.

:func:`read_annotations` reads every file and verifies every line with a
:class:`~shopbench.archive.signing.Verifier`; a line that is not JSON, not an annotation,
oversized, signed by another key than its file names or not signed at all is reported in
:attr:`AnnotationRead.problems` with its file and line number, never raised, as the
archive's reader reports the shards it drops. :meth:`AnnotationRead.live` is what readers
show: the verified annotations no later one of the same annotator retracts, bound to the
record in hand (:func:`~shopbench.traces.annotations.bound`).

An annotation is its signed content: its id hashes every field but the signature, so a line
repeated, or the same content signed again, is one annotation, read once and shown once (the
repeats counted, not verified again). A reader shows at most
:attr:`~shopbench.traces.annotations.AnnotationSettings.max_per_annotator` of one annotator
on one episode, the earliest by signed time, and says how many more it withholds
(:meth:`~shopbench.traces.annotations.AnnotationShelf.shown`). A long-running reader holds
an :class:`~shopbench.traces.annotations.AnnotationBook`: each file read once, then only
what is appended, indexed by episode.

The format's parts: the model, its signing bytes and its limits (``model.py``), the
durable append (``append.py``), and the bounded, verified read (``read.py``). What readers
make of it — annotations bound to the records in hand, the shelf a service shows — is in
:mod:`shopbench.traces.annotations`.
"""
