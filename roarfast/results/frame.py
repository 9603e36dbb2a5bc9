"""A run directory's measurements for a notebook (`roarfast.results.load`): read-only, as a pandas DataFrame, each
retraining row under the configuration it belongs to."""

from dataclasses import dataclass, field

from roarfast.rundir.results import open_results
from roarfast.measurements.row import KEY_COLUMNS, RETRAIN
from roarfast.rundir.configurations import claims, configurations, settings_of
from roarfast.rundir.directory import RunDir
from roarfast.records.configuration import ConfigurationRecord
from roarfast.rundir.labels import known_as, select, shown
from roarfast.stats import MARGIN, study_learning
from roarfast.stats.levels import margin_of

#: the columns that say which configuration a row is a cell of
CONFIGURATION_COLUMNS = ("configuration", "name")


@dataclass
class _Owner:
    """A configuration as `select` reads it: its id and what else selects it."""

    id: str
    known: list = field(default_factory=list)


def load(run_dir, *, status: str | None = "done", kind: str | None = None, config: str | None = None,
         margin: float | None = None):
    """Every measurement of `run_dir`'s results.sqlite for a notebook: a pandas DataFrame (one row per
    measurement: retraining cells and controls per seed, no-retrain evaluations, fill leakage; `kind`
    tells them apart, extras such as mean_probability and base_rate as columns, versions as a dict column),
    or a list of dicts when pandas is not installed. `status=None` includes running and failed ones;
    `kind` keeps one kind.

    A retraining row's `configuration` is the id of the configuration it is a cell of and `name` what that goes
    by (its --name, else its label); a cell two configurations share comes once under each, so group by
    configuration before averaging over seeds. Rows made before configurations were recorded take the id the
    report gives them (name None); the other kinds have neither. `config` keeps one configuration's rows: its id,
    an id prefix, its name or any label it was shown with (roarfast.rundir.labels.select).

    A retraining row's `study_status` is its configuration's: "conclusive", "inconclusive" or "underpowered"
    (roarfast.stats.learning, the report's rule, with `margin` points: None, the one its sweep recorded, else 5);
    None for the other kinds. (`status` is the measurement's own: done, running, failed.)"""
    run = RunDir(run_dir)
    if not run.results_path.exists():
        raise FileNotFoundError(f"{run.results_path} does not exist: nothing has been measured in {run_dir}")
    filters = {name: value for name, value in (("status", status), ("kind", kind)) if value is not None}
    with open_results(run, readonly=True) as db:
        rows = db.rows(**filters)
    records = configurations(run)
    owners = {r["id"]: _Owner(r["id"], known_as(r)) for r in records}
    out = []
    for row in rows:
        flat = {**{k: v for k, v in row.items() if k not in ("extra", "owner")}, **row["extra"]}
        for cid, name in _configurations_of(row, records):
            if cid is not None and cid not in owners:  # rows no record claims: selected by their id alone
                owners[cid] = _Owner(cid)
            out.append({"configuration": cid, "name": name, **flat})
    if config is not None:
        chosen = select(list(owners.values()), config, "config").id
        out = [r for r in out if r["configuration"] == chosen]
    statuses = _statuses(run, out, {r["id"]: r for r in records}, margin_of(margin))
    for r in out:
        r["study_status"] = statuses.get(r["configuration"])
    try:
        import pandas
    except ImportError:
        return out
    columns = list(out[0]) if out else [*CONFIGURATION_COLUMNS, *KEY_COLUMNS, "status", "study_status"]
    frame = pandas.DataFrame.from_records(out, columns=columns)
    # every text each configuration answers to (roarfast.plot's configuration= takes any of them, as config= here)
    frame.attrs["configurations"] = {cid: list(owner.known) for cid, owner in owners.items()}
    return frame


def _statuses(run, rows: list, records: dict, margin: float | None) -> dict:
    """{configuration id: its study's status} from its done retraining rows and its base model (the report's rule,
    roarfast.stats.study_learning): chance and the test split's size as its cells recorded them."""
    by_configuration = {}
    for r in rows:
        if r["kind"] == RETRAIN and r["configuration"] is not None and r["status"] == "done":
            by_configuration.setdefault(r["configuration"], []).append(r)
    out = {}
    for cid, cells in by_configuration.items():
        recorded = [g["margin"] for g in (records.get(cid) or {}).get("grids", []) if g.get("margin") is not None]
        chance, n_test = ({r.get(k) for r in cells} for k in ("test_chance", "test_images"))
        base = (cells[0].get("config") or {}).get("base")
        meta = run.model_meta(base) if base else run.base_meta()  # rows before schema v5: HEAD's, as the report
        learned = study_learning(cells, meta.get("test_acc"), chance.pop() if len(chance) == 1 else None,
                                 n_test.pop() if len(n_test) == 1 else None,
                                 margin if margin is not None else (recorded or [MARGIN])[-1])
        out[cid] = learned["status"]
    return out


def _configurations_of(row: dict, records: list) -> list:
    """[(configuration id, name)] of a results row: each configuration record that claims it; for a retraining row
    no record claims, the id of its settings as the report gives it ("unrecorded" before results schema v5)."""
    if row["kind"] != RETRAIN:
        return [(None, None)]
    found = [(r["id"], shown(r)) for r in records if claims(r, row)]
    if found:
        return found
    settings = settings_of(row)
    return [(ConfigurationRecord.unrecorded_id(settings), None)]
