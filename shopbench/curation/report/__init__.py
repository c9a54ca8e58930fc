"""The curation report: what came in, what each rule dropped and why, what was kept, and —
when the miners' true policies are known — how well each rule and the whole pipeline
separate dishonest traces from honest ones.

Labels: a trace is *dishonest* when its miner played a policy that imitates shopping
(narrators, the offline cheat, the guesser, ...), *honest* when it played one that shops
honestly, and *neither* for careless or random play (kept or dropped on their merits, and
left out of precision). A trace is *retained* when it is kept or when a rule whose drops
keep their decisions in the set (``duplicates``: the kept episode it duplicates has them)
dropped it; the rule's own counts stay its row's and ``duplicates_per_miner``'s. The
headline is computed from the per-policy table (``policies``), so the two agree:
``honest_retention`` is the retained share of the honest policies' traces,
``dishonest_removal_recall`` the removed (not retained) share of the dishonest policies',
``dishonest_removal_precision`` the dishonest share of the dishonest and honest traces
removed. Each rule's ``dropped`` counts the traces it was the first to drop (pipeline
order); a rule whose reason column is decided whatever ran before (per episode, or over
every valid episode in SQL) also reports what it would flag on its own (``alone``), over
every valid trace. Reasons are folded so that they group (ids to ``…``, the episode's own
numbers to ``N``) but keep the rule's parameters: ``process score N < 0.5``.
``duplicates_per_miner`` says how many of each miner's episodes the ``duplicates`` rule
dropped, and whose episodes were kept instead.

The report's parts: what ``report.json`` holds (``model.py``), how it is counted from
the ledger (``build.py``), and ``report.md`` written from it (``render.py``).
"""
