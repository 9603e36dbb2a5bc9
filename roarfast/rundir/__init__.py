"""The run directory and its history: every path of a run directory and the one way to its base models and
ranks (`directory.RunDir`), the configurations that requested cells (`configurations`; what makes cells
comparable: `catalog`; their names and labels: `labels`), run directories of format 1 read as they are
(`legacy`) and migrated in place (`migrate`) when a command opens one for writing (`writing`), its results.sqlite
opened with what format 1 kept beside it (`results`), and what is kept, listed and pruned (`inventory`, `roarfast
ls` / `prune`; a prune's removal, which a kill never leaves half done: `pruning`).

Its records (one type per artifact kind, their one put and verifying get, ids, HEAD, checkpoints, claims) are
roarfast.records's. The run directory imports them, the rank stores (roarfast.store), results.sqlite
(roarfast.measurements), the building blocks and the utilities; never a stage, the report or the results frame.
"""
