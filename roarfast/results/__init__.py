"""Results database: every measurement of a run directory in `<run_dir>/results.sqlite`, one row each, in
the table `measurements` (README, "The whole benchmark").

A measurement is identified by explicit columns (MeasurementKey): its kind, dataset, model, method, mode,
fill, fraction, seed and the hash of the rest of its configuration. Three kinds:
- retrain: a retraining cell or its mask-only control (roarfast.stages.cells); model = the retrained network,
  fill = NULL for a control (it sees no pixel values), epochs and val_acc of the training.
- no-retrain: the base model on modified test images (roarfast.stages.noretrain, MoRF / LeRF / ROAD); seed,
  epochs and val_acc NULL (nothing is trained or drawn); extra: mean_probability.
- fill-leakage: a per-pixel detector finding the removed pixels after a fill (roarfast.stages.fill_leakage);
  model = "detector", mode = "detect", test_acc = its pixel accuracy; extra: base_rate.

The package by job: .measurement (the key and the metrics of a row, checked), .schema (the table and the
migration of older files), .db (ResultsDB: claims, records, reads; open_results), .frame (`load`, for a
notebook). The claimant identities and heartbeats of claims are roarfast.rundir.claims's; HEARTBEAT_S,
HEARTBEAT_STALE_S, this_process and owner_alive are handed out here too for the callers that import them
from here.
"""

from roarfast.rundir.claims import HEARTBEAT_S, HEARTBEAT_STALE_S, owner_alive, this_process
from roarfast.results.db import ResultsDB, open_results
from roarfast.results.frame import load
from roarfast.results.measurement import (
    DETECTOR,
    FILL_LEAKAGE,
    KEY_COLUMNS,
    KIND_MODES,
    KINDS,
    METRIC_COLUMNS,
    NO_RETRAIN,
    RETRAIN,
    MeasurementKey,
    runtime_versions,
)
from roarfast.results.schema import SCHEMA_VERSION

__all__ = ["DETECTOR", "FILL_LEAKAGE", "HEARTBEAT_S", "HEARTBEAT_STALE_S", "KEY_COLUMNS", "KINDS", "KIND_MODES",
           "METRIC_COLUMNS", "NO_RETRAIN", "RETRAIN", "SCHEMA_VERSION", "MeasurementKey", "ResultsDB", "load",
           "open_results", "owner_alive", "runtime_versions", "this_process"]
