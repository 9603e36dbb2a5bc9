"""A run directory as a history (README, "Integrity"): every artifact kept under the identity of what made it
(`ids`: base models, rank stores, configurations), the record of the latest request (`head`: HEAD.json), the
configurations that requested cells (`configurations`), run directories of format 1 read as they are and
migrated in place (`legacy`), and what is kept, listed and pruned (`inventory`). The paths are RunDir's."""
