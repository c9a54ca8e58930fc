"""The neurons' loops and what they keep: config, state, scores and weights, catalog rotation,
the archive sink, metrics, the validator's rounds and the miner's server."""
