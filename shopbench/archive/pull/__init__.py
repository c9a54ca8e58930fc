"""Pulling one validator's published shards, verified, into a local folder.

:func:`~shopbench.archive.pull.run.pull` lists the manifests a source (a bucket, a folder
laid out as :mod:`shopbench.archive.remote` publishes, or another instance's HTTP mirror)
holds for one validator, and trusts nothing it names until checked:

- **Names are data.** Every path the source lists is checked by
  :func:`~shopbench.archive.paths.shard_path` before a byte is written for it; a name that
  is not one of the archive's own shard paths is reported in ``rejected`` and never
  followed, and the quarantine is confined to ``OUT/_quarantine/`` the same way.
- **Reads are bounded.** A manifest is read up to :attr:`PullLimits.manifest_bytes`, a
  head up to :data:`~shopbench.archive.head.MAX_HEAD_BYTES`, a shard up to the byte count
  its signed manifest states: a source that sends more is cut there, and the shard is
  quarantined saying so. Quarantined bytes are capped (:attr:`PullLimits.quarantine_bytes`);
  past the cap only the reason is kept.
- **Signatures and hashes.** Each manifest must be the validator's, signed, for the path it
  is published at; each shard's bytes must match it. A download goes to
  ``<shard>.partial`` (resumed from there when interrupted), is verified there, and only
  then takes the shard's place, so a bad download never replaces a good shard.
- **The signed head** (:mod:`shopbench.archive.head`) says which manifests must be there.
  A shard it names that the source does not serve is reported ``withheld``; a manifest
  other than the one it names is refused as a rollback or a substitution, as is a manifest
  older than the one already held for the same path; a head older than the one pulled
  before is reported and the newer one kept as the reference.
- **Partial failure delivers the rest.** A shard the source fails to send is reported in
  ``failed`` and the pull goes on; every intact shard is delivered.
- **Writes stay inside ``OUT``; links are never followed.** Every file the pull creates or
  replaces (a ``.partial``, a shard, a manifest, the head, the quarantine's files, each
  temporary name) and every folder on the way to it is examined with ``lstat`` first, and
  files are opened ``O_NOFOLLOW`` (new ones ``O_CREAT | O_EXCL``): a symbolic link planted
  anywhere on those paths stops the pull with :class:`~shopbench.archive.errors.LinkRefused`
  naming it, before a byte goes through it. A local source folder is read the same way: a
  link in its tree (a manifest, a shard, the head, a folder) is refused, never read through,
  so a source cannot make the pull read a file outside it.
- **Staleness is visible.** The report carries the reference head's signing time; with
  ``max_head_age_s`` a head older than that (or none at all) raises
  :class:`~shopbench.archive.errors.StaleHead` before anything is written.

:attr:`PullReport.complete` is False whenever anything was refused, withheld, failed or the
head is in doubt: ``traces pull`` then exits 1 naming each. The output is an archive root
that DuckDB and Hugging Face ``datasets`` read directly (see ``SHARD_GLOB``).

The pull's parts: where it writes (``destination.py``), what it reads from the source and
how much (``source.py``), what it reports (``report.py``), and the pull itself (``run.py``).
"""
