"""A run directory's records: one record type per kind, each owning its place, its write and its verified read
(`kind`: what a kind is, and the registry every kind joins by being defined), the one put and the one verifying
get of them (`access`: `put`, `get`, and `Records`, those of one run directory: RunDir.records), and the one
path builder every place comes from (`paths`). The kinds: a base model (`model`, its weights and meta in
`checkpoint`), a rank store's manifest (`ranks`), a configuration (`configuration`), a results row's config
(`rows`), a dataset (`dataset`), the latest request (`head`: HEAD.json), the stage times (`stage_times`) and a
prune's intent (`prune`). Besides: the one digest of an id (`ids`) and the claimants of the work several
processes share (`claims`).

Records sit below the rank stores (roarfast.store), results.sqlite (roarfast.measurements) and the run directory
(roarfast.rundir), which write and read their records here; they import the building blocks (models, for a
checkpoint's network) and the utilities, nothing above. Light on purpose (no torch, no numpy): `roarfast ls` and
every --help read records.
"""
