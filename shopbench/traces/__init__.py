"""What is made of the archive's traces: exports (JSON lines, ShoppingBench, ATIF, datasets),
dataset cards, annotations, diffs, the miner report, the leaderboard's EMA and the trace
service (`shopbench traces serve`)."""
