"""A run directory's records: one record type per artifact kind, each owning its place, its write and its
verified read, and the one put and verifying get of them (`Records`, RunDir.records); the ids (`ids`: the one
digest of an id), the base models' checkpoints (`checkpoint`), the latest request (`head`: HEAD.json), a rank
store's manifest (`ranks`), and the claimants of the work several processes share (`claims`).

Records sit below the rank stores (roarfast.store), results.sqlite (roarfast.measurements) and the run directory
(roarfast.rundir), which write and read their records here; they import the building blocks (models, for a
checkpoint's network) and the utilities, nothing above. Light on purpose (no torch, no numpy): `roarfast ls` and
every --help read records.
"""
