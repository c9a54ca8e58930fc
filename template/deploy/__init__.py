"""Keeping a validator running for weeks: its entry commands, and the updater that brings a
git checkout to its upstream and asks the validator to restart between rounds.

The deployment files that run them (``deploy/``: the Dockerfile, compose, pm2, systemd,
Prometheus) are described in docs/validator.md, *Run it for weeks*.
"""
