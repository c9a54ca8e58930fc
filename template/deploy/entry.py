"""The entry commands every process manager runs, declared once.

``deploy/Dockerfile``, ``deploy/compose.yaml``, ``deploy/pm2/ecosystem.config.js`` and the
systemd units in ``deploy/systemd/`` start these scripts with the project's Python from the
checkout's root; the tests run the same scripts and check that each file names them.
"""

from __future__ import annotations

VALIDATOR_SCRIPT = "neurons/validator.py"
"""The validator neuron (``python neurons/validator.py --netuid N ...``)."""

UPDATER_SCRIPT = "neurons/updater.py"
"""The updater (``python neurons/updater.py [--every SECONDS]``)."""
