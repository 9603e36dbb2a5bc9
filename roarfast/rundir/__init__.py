"""The run directory and its history: every path of a run directory and the one way to its base models and
ranks (`directory.RunDir`), one record type per artifact kind with its id and stored fields, and the one put and
verifying get of those records (`records`, `record_store`), the one digest of an id (`ids`), the latest request
(`head`: HEAD.json), the configurations that requested cells (`configurations`), run directories of format 1
read as they are (`legacy`) and migrated in place (`migrate`) when a command opens one for writing
(`writing`), safetensors checkpoints with their sealed meta (`checkpoint`), claimant identities and claim locks (`claims`), and what is kept, listed and pruned
(`inventory`, `roarfast ls` / `prune`; a prune's removal, which a kill never leaves half done: `pruning`).

These are records: they import the building blocks (data, models, the rank store, results) and the
utilities, never a stage; `inventory`, which reads the report's view of configurations, sits above them.
"""
