"""A run directory's results as a researcher reads them: `load` (a pandas DataFrame, each retraining row under the
configuration it belongs to: .frame), and the names a notebook or a script needs to read or write results.sqlite
itself (README, "The whole benchmark").

results.sqlite is roarfast.measurements's (the key and metrics of a row, the schema and its migrations,
ResultsDB's claims, records and reads); `open_results` opens a run directory's (roarfast.rundir.results), and the
claimant identities and heartbeats of its claims are roarfast.records.claims's. This package sits above the run
directory (its frame reads the configuration records and their labels); nothing in roarfast below the command
line imports it.
"""

from roarfast.measurements.db import ResultsDB
from roarfast.measurements.row import (
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
from roarfast.measurements.schema import SCHEMA_VERSION
from roarfast.records.claims import HEARTBEAT_S, HEARTBEAT_STALE_S, owner_alive, this_process
from roarfast.results.frame import load
from roarfast.rundir.results import open_results

__all__ = ["DETECTOR", "FILL_LEAKAGE", "HEARTBEAT_S", "HEARTBEAT_STALE_S", "KEY_COLUMNS", "KINDS", "KIND_MODES",
           "METRIC_COLUMNS", "NO_RETRAIN", "RETRAIN", "SCHEMA_VERSION", "MeasurementKey", "ResultsDB", "load",
           "open_results", "owner_alive", "runtime_versions", "this_process"]
