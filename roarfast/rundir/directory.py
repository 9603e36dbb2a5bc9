"""A run directory (`runs/<name>/`, laid out as below; format 2): the one object that knows where everything
in it lives. No other module spells one of these paths. Every artifact lives under the id of what made it
(roarfast.rundir.ids), so a run with other settings adds one beside the others and never replaces one.

    HEAD.json           the latest request (roarfast.rundir.head): its dataset record, base model id, each
                        method's rank id, its configuration's id, the command, the time
    datasets/<fp>.json  one record per dataset used (name, absolute data_dir, options, fingerprint, canvas,
                        image counts); fp: the fingerprint's first 16 hex
    models/<id>/        a base model (model.safetensors + meta.json; roarfast.rundir.checkpoint)
    ranks/<method>/<id>/<split>/   a rank store (roarfast.store)
    configurations/<id>.json       one per configuration of cells requested (roarfast.rundir.configurations)
    results.sqlite      every measurement (roarfast.results)
    stages.json         seconds per stage, merged by the sweep (the report's stage times)
    report/             the report's default output
    claims/             one lock file per thing built once for every process (a base model, a method's
                        ranks, HEAD): RunDir.claim (roarfast.rundir.claims)
    leakage.json        fill leakage before results schema v3; moved into results.sqlite when met

A run directory of format 1 (checkpoints/base, attributions/<method>/<split>, dataset.json) is read as it is
by the readers (its artifacts' ids read off their records: roarfast.rundir.legacy) and migrated in place by
the first command that writes (roarfast.rundir.writing.open_for_writing, once per process).

Its base models', rank stores' and configurations' records are written and read back, verified, through
`records` (roarfast.rundir.record_store: one put, one verifying get of the record types of
roarfast.rundir.records). It also loads a base model for a dataset (refusing one trained on another dataset),
reads ranks only when they match their id, the dataset and their base model, checks that a stage can write
before it spends compute, and keeps the stage-time record. Every record it reads is verified (a checkpoint's weights and meta, HEAD.json,
the dataset records and stages.json carry digests: roarfast.common.fingerprint.seal), the repair named in the one
line of a mismatch; every file it writes is replaced atomically, never through a link (roarfast.common.atomic).
"""

import logging
import re
from contextlib import contextmanager
from pathlib import Path

from roarfast.common.atomic import check_writable, refuse_link, write_record
from roarfast.rundir.checkpoint import META, WEIGHTS, checkpoint_sha256, load_checkpoint
from roarfast.rundir.claims import hold_lock
from roarfast.data import load_dataset
from roarfast.data.registry import DATASETS
from roarfast.errors import UserError
from roarfast.common.fingerprint import read_record
from roarfast.rundir.fallback import say_embedded_fallback
from roarfast.rundir.head import Head, read_head, updated, write_head
from roarfast.rundir.ids import check_id, is_id
from roarfast.rundir.record_store import Records
from roarfast.rundir.records import ModelRecord, RankStoreRecord
from roarfast.rundir.legacy import legacy_head, legacy_models, legacy_ranks, needs_migration
from roarfast.models import MODELS
from roarfast.common.plugins import is_import_path
from roarfast.common.resolver import BUILTIN
from roarfast.store.layout import dir_name, read_manifest

log = logging.getLogger(__name__)

#: the format of the dataset records and stages.json: 2 since they are sealed with their digest (1: before)
RECORD_FORMAT = 2
#: the characters of a dataset fingerprint that name its record in datasets/
DATASET_CHARS = 16
#: the repair of a damaged stages.json
_STAGES_REPAIR = "remove it (the next sweep records the stage times again) or restore it"


class RunDir:
    """The run directory at `root` (created by the first command that writes into it)."""

    def __init__(self, root):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunDir({str(self.root)!r})"

    @property
    def records(self) -> Records:
        """The one put and the one verifying get of its base models', rank stores' and configurations' records."""
        return Records(self)

    # ------------------------------------------------------------------------------------------- paths

    @property
    def head_path(self) -> Path:
        return self.root / "HEAD.json"

    @property
    def datasets_root(self) -> Path:
        return self.root / "datasets"

    def dataset_record_path(self, fingerprint: str) -> Path:
        # a fingerprint read from a record names a file only when it is hex (never "../x")
        if not (isinstance(fingerprint, str) and re.fullmatch(r"[0-9a-f]{16,128}", fingerprint)):
            raise UserError(f"{self.root}: the dataset fingerprint {str(fingerprint)[:40]!r} a record gives is not a "
                            f"digest: the record was edited or damaged; restore it, or remove it")
        return self.datasets_root / f"{fingerprint[:DATASET_CHARS]}.json"

    @property
    def models_root(self) -> Path:
        return self.root / "models"

    def model_dir(self, model_id: str) -> Path:
        return self.models_root / check_id(model_id, "base model", self.root)

    @property
    def ranks_root(self) -> Path:
        return self.root / "ranks"

    def rank_dir(self, method: str, rank_id: str) -> Path:
        """Where the rank store of `method` with id `rank_id` lives (its splits below it)."""
        return self.ranks_root / dir_name(method) / check_id(rank_id, f"ranks of {method}", self.root)

    @property
    def configurations_root(self) -> Path:
        return self.root / "configurations"

    def configuration_path(self, configuration_id: str) -> Path:
        return self.configurations_root / f"{check_id(configuration_id, 'configuration', self.root)}.json"

    @property
    def results_path(self) -> Path:
        return self.root / "results.sqlite"

    @property
    def stage_times_path(self) -> Path:
        return self.root / "stages.json"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def claims_dir(self) -> Path:
        return self.root / "claims"

    @property
    def prune_intent_path(self) -> Path:
        """A prune's intent, written before it removes anything (roarfast.rundir.pruning)."""
        return self.claims_dir / "prune.json"

    @property
    def trash_dir(self) -> Path:
        """Where a prune renames an artifact before removing it: a kill never leaves one half removed."""
        return self.claims_dir / "trash"

    @property
    def legacy_fill_leakage_path(self) -> Path:
        """Where `roarfast leakage` wrote its rows before they went into results.sqlite (schema v3)."""
        return self.root / "leakage.json"

    @property
    def legacy_base_checkpoint(self) -> Path:
        """Format 1's base model (roarfast.rundir.legacy)."""
        return self.root / "checkpoints" / "base"

    @property
    def legacy_rank_root(self) -> Path:
        """Format 1's rank stores, `<method>/<split>` below it."""
        return self.root / "attributions"

    @property
    def legacy_dataset_path(self) -> Path:
        """Format 1's dataset record."""
        return self.root / "dataset.json"

    # --------------------------------------------------------------------------------------------- HEAD

    def head(self):
        """The latest request (roarfast.rundir.head.Head, verified): HEAD.json, or what a run directory of
        format 1 says of it (roarfast.rundir.legacy), or an empty Head in a new one."""
        if self.head_path.is_symlink():  # every command reads and most write it: a link there is refused at once
            refuse_link(self.head_path)
        head = read_head(self.head_path)
        if head is None:
            head = legacy_head(self) or Head()
        return head

    def update_head(self, asked: str, **changes):
        """Records the latest request: HEAD with `changes` (dataset, base, ranks, configuration), stamped with the
        command the user ran (else `asked`), replaced atomically under the run directory's claim on it."""
        self.root.mkdir(parents=True, exist_ok=True)
        with self.claim("head"):
            head = updated(self.head(), asked, **changes)
            write_head(self.head_path, head)
        return head

    # ----------------------------------------------------------------------------------- writes, claims

    def check_writable(self, need_bytes: int = 0, places=()) -> None:
        """Refuses, before a stage spends compute, a run directory that cannot be created or written, or
        whose filesystem has less free space than the `need_bytes` the stage will write, or where a symbolic
        link stands at a record's place or at one of the `places` the stage writes, or a hard link at
        results.sqlite's, which SQLite writes in place (atomic.refuse_link: no record is written through a link)."""
        check_writable(self.root, need_bytes, "--run-dir")
        base = self.base_checkpoint if self.head().base else None
        for path in (self.head_path, self.stage_times_path, *places,
                     *((base / WEIGHTS, base / META) if base is not None else ())):
            refuse_link(path)
        for suffix in ("", "-wal", "-shm"):
            refuse_link(self.results_path.with_name(self.results_path.name + suffix), in_place=True)

    @contextmanager
    def claim(self, what: str, waiting=None):
        """Holds this run directory's claim on `what` (a base model, a method's ranks, HEAD) while the body runs,
        so one process at a time builds it; another waits here (calling `waiting(holder)` once, holder: "pid
        N on HOST"), then finds it built. The claim is an exclusive lock on claims/<what>.lock, which the
        kernel releases when the holder exits or dies: a killed claimant's work is taken over at once, as a
        dead owner's cell is."""
        refuse_link(self.claims_dir)  # the lock files would be written wherever it points
        self.claims_dir.mkdir(parents=True, exist_ok=True)
        with hold_lock(self.claims_dir / f"{dir_name(what)}.lock", waiting):  # a long method's name bounded
            yield

    # ------------------------------------------------------------------------------------- base models

    def model_path(self, model_id: str) -> Path:
        """The directory of the base model `model_id`: models/<id>, or format 1's checkpoints/base where that
        is the one (a run directory read as it is)."""
        return legacy_models(self).get(model_id) or self.model_dir(model_id)

    def models(self) -> dict:
        """{model id: directory} of every complete base model (its meta.json written), format 1's included."""
        found = {}
        if self.models_root.is_dir():
            # a link at a meta.json is no base model: the training that would replace it refuses it
            found = {p.name: p for p in sorted(self.models_root.iterdir())
                     if is_id(p.name) and (p / META).is_file() and not (p / META).is_symlink()}
        return {**legacy_models(self), **found}

    def model_meta(self, model_id: str | None) -> dict:
        """The verified meta.json of the base model `model_id` ({} when there is none); a UserError when it
        does not match its id (a directory renamed, a record edited): Records.get."""
        if model_id is None:
            return {}
        return self.records.get(ModelRecord.kind, model_id) or {}

    @property
    def base_checkpoint(self) -> Path:
        """The directory of HEAD's base model (models/ when HEAD has none)."""
        base = self.head().base
        return self.model_path(base) if base else self.models_root

    @property
    def base_meta_path(self) -> Path:
        return self.base_checkpoint / META

    def base_meta(self) -> dict:
        """HEAD's base model's meta.json, or {} when there is none."""
        return self.model_meta(self.head().base)

    @property
    def train_again(self) -> str:
        """The repair of a damaged base checkpoint."""
        return f"retrain the base model (`roarfast train --run-dir {self.root}`) or restore the file"

    def save_base_model(self, model, meta: dict) -> str:
        """Saves `model` with `meta` as the base model of the id its meta gives (Records.put); returns the id."""
        return self.records.put(ModelRecord.from_record(meta), meta, model=model)

    def check_base_model(self) -> None:
        """A UserError saying to train first when HEAD names no base model, or one that is not there."""
        base = self.head().base
        if base is None or not (self.model_path(base) / META).is_file():
            where = self.model_path(base) if base else self.models_root
            raise UserError(f"no base model in {where}: run `roarfast train --run-dir {self.root}` first")

    def load_base_model(self, ds, device="cpu", model_id: str | None = None):
        """(model in eval mode on `device`, meta) of the base model `model_id` (default: HEAD's), which must
        have been trained on `ds` (same fingerprint); a UserError saying what to do otherwise."""
        if model_id is None:
            self.check_base_model()
            model_id = self.head().base
        where = self.model_path(model_id)
        self.model_meta(model_id)  # its id checked before the weights are read
        model, meta = load_checkpoint(where, device=device, repair=self.train_again)
        if meta.get("dataset_fingerprint") != ds.fingerprint:
            raise UserError(f"the base model in {where} was trained on dataset {meta.get('dataset_fingerprint')} but "
                            f"this dataset is {ds.fingerprint}; train one on it (`roarfast train --run-dir "
                            f"{self.root}` with this dataset: kept beside the other) or pick the matching --dataset")
        return model, meta

    def check_named_model(self, spec) -> None:
        """Refuses (one line) a --model naming another model than the one HEAD's base model records: a stage that
        loads the base model takes --model only to name it again (a plug-in the record names is imported only
        then: roarfast.common.plugins.check_recorded). Nothing is imported here."""
        recorded = self.base_meta().get("model")
        if spec is None or recorded is None:
            return
        query = MODELS.query(spec)
        named = query.entry.name if query.form == BUILTIN else query.text
        if named != recorded:
            raise UserError(f"--model {spec}: the base model in {self.base_checkpoint} is {recorded}; name that one "
                            f"(or none: --model only names the base model again here)")

    def base_checkpoint_sha256(self, model_id: str | None = None) -> str:
        """The hash of the weights of the base model `model_id` (default: HEAD's), verified against the one
        recorded when they were saved: what its ranks and no-retrain measurements are tied to."""
        return checkpoint_sha256(self.model_path(model_id or self.head().base), self.train_again)

    # ------------------------------------------------------------------------------------------- ranks

    def rank_path(self, method: str, rank_id: str) -> Path:
        """The directory of `method`'s rank store `rank_id`: ranks/<method>/<id>, or format 1's
        attributions/<method> where that is the one (a run directory read as it is)."""
        return legacy_ranks(self).get((method, rank_id)) or self.rank_dir(method, rank_id)

    def rank_stores(self) -> list:
        """(method, rank id, directory) of every rank store, format 1's included, sorted."""
        found = dict(legacy_ranks(self))
        if self.ranks_root.is_dir():
            for method_dir in sorted(p for p in self.ranks_root.iterdir() if p.is_dir()):
                for store in sorted(p for p in method_dir.iterdir() if p.is_dir() and is_id(p.name)):
                    method = method_dir.name
                    for split in sorted(p for p in store.iterdir() if p.is_dir()):
                        try:
                            method = (read_manifest(split, self.root) or {}).get("method", method)
                        except UserError:  # damaged: its readers refuse it, naming the repair
                            continue
                    found[(method, store.name)] = store
        return sorted((method, rank_id, path) for (method, rank_id), path in found.items())

    def ranks_for(self, ids: dict):
        """The rank stores {method: rank id} (roarfast.store.RankStore: read, listed, written at their places)."""
        # late: loads torch, and `roarfast ls` / `prune` read the run directory's records without it
        from roarfast.store.index import RankStore

        return RankStore(self.ranks_root, run_dir=self.root,
                         places={method: self.rank_path(method, rank_id) for method, rank_id in ids.items()})

    @property
    def rank_store(self):
        """The rank stores HEAD names (its latest extraction of each method)."""
        return self.ranks_for(self.head().ranks)

    def read_ranks(self, method: str, split: str, dataset_fingerprint: str, rank_id: str | None = None,
                   base: str | None = None):
        """The ranks of (method, split) in the store `rank_id` (default: HEAD's for the method) as a
        store.RankRecord, its rows verified as they are read; refused in one line when the store is not the one
        its id names (damage), or was made from another dataset, or from another base model than `base` (default:
        HEAD's) or one no longer there: every reader of ranks reads them here."""
        head = self.head()
        rank_id = rank_id or head.ranks.get(method)
        if rank_id is None:
            raise UserError(f"no ranks of {method} in {self.root}'s latest request: run `roarfast extract --method "
                            f"{method} --run-dir {self.root}` first")
        base = base or head.base
        present = base is not None and (self.model_path(base) / META).is_file()
        current = self.base_checkpoint_sha256(base) if present else None
        store = self.ranks_for({method: rank_id})
        record = store.read(method, split, dataset_fingerprint=dataset_fingerprint, checkpoint_sha256=current)
        self.records.get(RankStoreRecord.kind, rank_id, method, split, repair=f"`roarfast extract --force --method "
                         f"{method} --run-dir {self.root}` makes them again")
        stamp = record.manifest["checkpoint_sha256"]
        if current is None and stamp is not None:
            raise UserError(f"ranks in {record.directory} were made with base checkpoint sha256 {stamp}, but "
                            f"{self.model_path(base) if base else self.models_root} holds no model: restore it, or "
                            f"`roarfast train --run-dir {self.root}` and `roarfast extract --force --method {method} "
                            f"--run-dir {self.root}`")
        return record

    def rank_ids(self, selection, fingerprint: str, base: str | None = None) -> dict:
        """{method: the id of its ranks} as an extraction of `selection` (a roarfast.methods.selection.Selection)
        makes them on the data of `fingerprint` from the base model `base` (default: HEAD's; read only where a
        method uses the model): its ranks' identity (Selection.ranks_identity), checkpoint and data."""
        checkpoint = self.base_checkpoint_sha256(base) if selection.needs_model else None
        return {m: RankStoreRecord(m, selection.ranks_identity(m), selection.ranks_checkpoint(m, checkpoint),
                                   fingerprint).id for m in selection.names}

    def ranks_to_make(self, selection, splits, fingerprint: str, base: str | None = None) -> list[str]:
        """The methods of `selection` whose ranks an extraction of `splits` would make: the store of their id
        (rank_ids) missing or incomplete in a split; a complete one is reused."""
        store = self.ranks_for(self.rank_ids(selection, fingerprint, base))
        return [m for m in selection.names
                if any((store.manifest(m, split) or {}).get("complete") is not True for split in splits)]

    # ----------------------------------------------------------------------------------------- dataset

    @property
    def dataset_path(self) -> Path:
        """The record later commands read the dataset from: HEAD.json (format 1's dataset.json in a run directory
        read as it is)."""
        return self.legacy_dataset_path if needs_migration(self) else self.head_path

    def remember_dataset(self, ds) -> dict:
        """Records ds's name, options (defaults included; how it was read, e.g. streamed, too), the folder it
        was loaded from (ds.data_dir, set by load_dataset) as an absolute path, its fingerprint, canvas and image
        counts in datasets/<fingerprint>.json, sealed with its digest; returns the record (HEAD carries it)."""
        options = {**ds.options, **ds.read_options}
        data_dir = getattr(ds, "data_dir", None)
        record = {"name": ds.name, "data_dir": None if data_dir is None else str(Path(data_dir).expanduser().resolve()),
                  "options": {k: v for k, v in options.items() if k != "name"}, "fingerprint": ds.fingerprint,
                  # what a dry run shows without loading the data again
                  "shape": list(ds.train.shape), "images": {"train": len(ds.train), "test": len(ds.test),
                                                            "validation": len(ds.val_index)},
                  "ground_truth": ds.train.masks is not None}
        self.datasets_root.mkdir(parents=True, exist_ok=True)
        write_record(self.dataset_record_path(ds.fingerprint), {**record, "format": RECORD_FORMAT})
        return record

    def dataset_record(self, fingerprint: str | None = None) -> dict | None:
        """The record of the dataset of `fingerprint` (datasets/), else HEAD's dataset (name, data_dir, options,
        fingerprint), verified, or None."""
        if fingerprint is None:
            return self.head().dataset
        return _read_record(self.dataset_record_path(fingerprint), "restore it, or name the dataset again "
                                                                   "(--dataset, --data-dir, --data-option)")

    def dataset_spec(self, name=None, data_dir=None, options=None) -> tuple:
        """(name, data_dir, options) to load: explicit arguments win; what `train` recorded fills in the rest
        when no dataset is named, or when the plug-in it records (an import path) is named again alone (no
        data_dir, no options); otherwise the embedded dataset with its defaults (a line says so where the run
        directory holds work: roarfast.rundir.fallback). A recorded name is only a
        name: a plug-in is loaded where the user named it again or trusts the run directory, and refused in one
        line otherwise (roarfast.common.plugins.check_recorded)."""
        options = dict(options or {})
        record = None
        if name is None:
            record = self.dataset_record()
            if record is not None:
                DATASETS.query(record["name"], recorded_in=self.dataset_path)
        elif is_import_path(name) and data_dir is None and not options:
            record = self._record_of(name.strip())
        if record is not None:
            name = record["name"]
            if data_dir is None:
                data_dir = _recorded_dir(record, self.dataset_path)
            options = {**record["options"], **options}
        elif name is None:
            say_embedded_fallback(self)
        return name or "embedded", data_dir, options

    def open_recorded_dataset(self, fingerprint: str):
        """The dataset of `fingerprint` as its record in datasets/ describes it (a recorded name only a name, as
        for HEAD's), loaded and checked to be that data; a UserError saying why it cannot be."""
        path = self.dataset_record_path(fingerprint)
        record = self.dataset_record(fingerprint)
        if record is None:
            raise UserError(f"no record of the data {fingerprint[:8]} in {self.datasets_root}")
        DATASETS.query(record["name"], recorded_in=path)
        ds = load_dataset(record["name"], _recorded_dir(record, path), **record["options"])
        if ds.fingerprint != fingerprint:
            raise UserError(f"the data {path} records has changed since (fingerprint {ds.fingerprint[:8]}, not "
                            f"{fingerprint[:8]})")
        return ds

    def _record_of(self, name: str) -> dict | None:
        """The dataset record when it records the dataset `name`, else None; a record that does not verify is
        left aside here (naming the dataset in full is its repair)."""
        try:
            record = self.dataset_record()
        except UserError:
            return None
        return record if record is not None and record["name"] == name else None

    def open_dataset(self, name=None, data_dir=None, options=None):
        """load_dataset on dataset_spec(...)."""
        name, data_dir, options = self.dataset_spec(name, data_dir, options)
        return load_dataset(name, data_dir, **options)

    # ------------------------------------------------------------------------------------- stage times

    def record_stage_time(self, stage: str, value) -> None:
        """Merges one stage's seconds (a number, or {part: seconds} merged into earlier parts) into
        stages.json."""
        refuse_link(self.stage_times_path)  # before it is read: the write would be refused after the merge
        stages = self.stage_times() or {}  # a damaged one is begun anew: it holds only times
        stages[stage] = {**stages.get(stage, {}), **value} if isinstance(value, dict) else value
        self.root.mkdir(parents=True, exist_ok=True)
        write_record(self.stage_times_path, {**stages, "format": RECORD_FORMAT})

    def stage_times(self) -> dict | None:
        """stages.json's content (verified), or None when no sweep recorded any, or when it is damaged (said in
        one line: the times are left out, nothing else depends on them)."""
        try:
            return _read_record(self.stage_times_path, _STAGES_REPAIR)
        except UserError as err:
            log.warning("note: the stage times are left out: %s", err)
            return None


def _read_record(path: Path, repair: str) -> dict | None:
    """The verified content of a run-directory record (roarfast.common.fingerprint.read_record; its format field
    left out), or None when there is none; a UserError naming it and the `repair` when it is not JSON or
    does not match its digest."""
    record = read_record(path, repair, older=lambda record: "format" not in record)
    if record is not None:
        record.pop("format", None)
    return record


def _recorded_dir(record: dict, path: Path) -> str | None:
    """The folder a dataset record (read from `path`) names, when it names one; a UserError when it is gone."""
    data_dir = record["data_dir"]
    if data_dir is not None and not Path(data_dir).exists():
        raise UserError(f"{path} records the data in {data_dir}, which does not exist (moved?): give its new place "
                        f"with --data-dir")
    return data_dir
