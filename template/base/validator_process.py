"""The validator neuron as a process: the clock checked, the wallet loaded, the metrics
served, and :class:`~template.base.validator.Validator` run until SIGINT/SIGTERM or a
restart request between rounds (``neurons/validator.py`` runs it)."""

from __future__ import annotations

import asyncio
import logging

from template.base.config import ValidatorConfig
from template.base.validator import Validator

log = logging.getLogger("template.validator")


async def run_validator(config: ValidatorConfig) -> None:
    """The validator neuron: check the clock, load the wallet, serve metrics, loop until
    SIGINT/SIGTERM (the round in flight is abandoned; the state of the last one is saved) or
    until a restart is requested between rounds (then it returns, and the process exits 0)."""
    import signal

    from template.base.neuron import load_wallet, make_chain, startup_clock_check
    from template.base.ports import bind_error

    startup_clock_check(config.neuron.clock)
    wallet = load_wallet(config.wallet)
    chain = make_chain(wallet, config.subtensor, config.netuid)
    validator = Validator(config, chain, wallet)
    if config.neuron.metrics_port:
        n = config.neuron
        try:
            validator.metrics.serve(n.metrics_port, n.metrics_host)
        except OSError as e:
            await validator.close()
            raise bind_error("--neuron.metrics_port", n.metrics_host, n.metrics_port, e) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        log.warning(validator.stopping_line(sig.name), extra={"signal": sig.name})
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    runner = asyncio.create_task(validator.run(stop=stop))
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if runner.done():
            runner.result()  # re-raise a fatal error
    finally:
        for task in (runner, stopper):
            task.cancel()
        await asyncio.gather(runner, stopper, return_exceptions=True)
        await validator.close()
