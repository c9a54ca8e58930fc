"""The archive's storage engine: signed Parquet shards, manifests, the signed head, the one
verified reader, queries, remotes and the verifying pull."""
