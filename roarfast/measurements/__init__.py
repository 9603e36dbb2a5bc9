"""results.sqlite: every measurement of a run directory, one row each, in the table `measurements` (README, "The
whole benchmark"; its public face for a notebook is roarfast.results).

A measurement is identified by explicit columns (MeasurementKey): its kind, dataset, model, method, mode,
fill, fraction, seed and the hash of the rest of its configuration. Three kinds:
- retrain: a retraining cell or its mask-only control (roarfast.stages.cells); model = the retrained network,
  fill = NULL for a control (it sees no pixel values), epochs and val_acc of the training.
- no-retrain: the base model on modified test images (roarfast.stages.noretrain, MoRF / LeRF / ROAD); seed,
  epochs and val_acc NULL (nothing is trained or drawn); extra: mean_probability.
- fill-leakage: a per-pixel detector finding the removed pixels after a fill (roarfast.stages.fill_leakage);
  model = "detector", mode = "detect", test_acc = its pixel accuracy; extra: base_rate.

The package by job: .row (the key and the metrics of a row, checked), .schema (the table and the migration of
older files), .sqlite (opening the file: links refused, its integrity checked, a reader's copy in memory), .db
(ResultsDB: claims, records, reads, on the file's path). It imports the records (a row's config is one:
roarfast.records.rows; the claimant identities of roarfast.records.claims) and the building blocks, never the run
directory: a run directory's file is opened by roarfast.rundir.results.open_results.
"""
