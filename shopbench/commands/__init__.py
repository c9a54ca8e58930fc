"""CLI command groups; each module exposes `register(app, bench_app)`."""
