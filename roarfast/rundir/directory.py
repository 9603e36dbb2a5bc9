"""A run directory (`runs/<name>/`, laid out as below; format 2): the one object that knows where everything
in it lives. No other module spells one of these paths. Every artifact lives under the id of what made it
(roarfast.records.ids), so a run with other settings adds one beside the others and never replaces one.

    HEAD.json           the latest request (roarfast.records.head): its dataset record, base model id, each
                        method's rank id, its configuration's id, the command, the time
    datasets/<fp>.json  one record per dataset used (name, absolute data_dir, options, fingerprint, canvas,
                        image counts); fp: the fingerprint's first 16 hex
    models/<id>/        a base model (model.safetensors + meta.json; roarfast.records.checkpoint)
    ranks/<method>/<id>/<split>/   a rank store (roarfast.store)
    configurations/<id>.json       one per configuration of cells requested (roarfast.rundir.configurations)
    results.sqlite      every measurement (roarfast.measurements)
    stages.json         seconds per stage, merged by the sweep (the report's stage times)
    report/             the report's default output
    claims/             one lock file per thing built once for every process (a base model, a method's
                        ranks, HEAD): RunDir.claim (roarfast.records.claims)
    claims/prune.json   a prune's intent while it removes (roarfast.rundir.pruning)
    leakage.json        fill leakage before results schema v3; moved into results.sqlite when met

A run directory of format 1 (checkpoints/base, attributions/<method>/<split>, dataset.json) is read as it is
by the readers (its artifacts' ids read off their records: roarfast.rundir.legacy) and migrated in place by
the first command that writes (roarfast.rundir.writing.open_for_writing, once per process).

Each record (HEAD, a dataset's, a base model's, a rank store's, a configuration's, the stage times) is written
and read back, verified, through `records` (roarfast.records.access: the one put and verifying get; each kind
owns its place, built by the one path builder, and its stored form: roarfast.records). It also loads a base
model for a dataset (refusing one trained on another dataset), reads ranks only when they match their id, the
dataset and their base model, checks that a stage can write before it spends compute, and keeps the stage-time
record. Every record it reads is verified (each carries its digest: roarfast.common.fingerprint.seal; a
checkpoint's meta the weights' too), the repair named in the one line of a mismatch; every file it writes is
replaced atomically, never through a link (roarfast.common.atomic).
"""

import logging
from contextlib import contextmanager
from pathlib import Path

from roarfast.common.atomic import check_writable, refuse_link
from roarfast.common.resolver import BUILTIN
from roarfast.errors import UserError
from roarfast.models import MODELS
from roarfast.records.access import Records
from roarfast.records.checkpoint import META, WEIGHTS, checkpoint_sha256, load_checkpoint
from roarfast.records.claims import CLAIMS, hold_lock
from roarfast.records.configuration import ConfigurationRecord
from roarfast.records.dataset import DatasetRecord
from roarfast.records.head import Head, updated
from roarfast.records.ids import is_id
from roarfast.records.model import ModelRecord
from roarfast.records.paths import place
from roarfast.records.prune import PruneIntent
from roarfast.records.ranks import MANIFEST, RankStoreRecord, dir_name
from roarfast.records.stage_times import StageTimes
from roarfast.rundir.datasets import RunDatasets
from roarfast.rundir.legacy import legacy_head, legacy_models, legacy_ranks

log = logging.getLogger(__name__)


class RunDir(RunDatasets):
    """The run directory at `root` (created by the first command that writes into it); the datasets it used are
    RunDatasets's."""

    def __init__(self, root):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunDir({str(self.root)!r})"

    @property
    def records(self) -> Records:
        """The one put and the one verifying get of its records, each at its kind's place (roarfast.records)."""
        return Records(self.root, run_dir=self.root)

    # ----------------------------------------------------------------------- paths, all from the one builder

    @property
    def head_path(self) -> Path:
        return self.records.path(Head)

    @property
    def datasets_root(self) -> Path:
        return place(self.root, DatasetRecord.folder)

    def dataset_record_path(self, fingerprint: str) -> Path:
        return self.records.path(DatasetRecord, fingerprint)

    @property
    def models_root(self) -> Path:
        return place(self.root, ModelRecord.folder)

    def model_dir(self, model_id: str) -> Path:
        return self.records.path(ModelRecord, model_id).parent

    @property
    def ranks_root(self) -> Path:
        return place(self.root, RankStoreRecord.folder)

    def rank_dir(self, method: str, rank_id: str) -> Path:
        """Where the rank store of `method` with id `rank_id` lives (its splits below it)."""
        return self.records.path(RankStoreRecord, rank_id, method=method).parent.parent

    @property
    def configurations_root(self) -> Path:
        return place(self.root, ConfigurationRecord.folder)

    def configuration_path(self, configuration_id: str) -> Path:
        return self.records.path(ConfigurationRecord, configuration_id)

    @property
    def results_path(self) -> Path:
        return place(self.root, "results.sqlite")

    @property
    def stage_times_path(self) -> Path:
        return self.records.path(StageTimes)

    @property
    def report_dir(self) -> Path:
        return place(self.root, "report")

    @property
    def claims_dir(self) -> Path:
        return place(self.root, CLAIMS)

    @property
    def prune_intent_path(self) -> Path:
        """A prune's intent, written before it removes anything (roarfast.rundir.pruning)."""
        return self.records.path(PruneIntent)

    @property
    def trash_dir(self) -> Path:
        """Where a prune renames an artifact before removing it: a kill never leaves one half removed."""
        return place(self.root, CLAIMS, "trash")

    @property
    def legacy_fill_leakage_path(self) -> Path:
        """Where `roarfast leakage` wrote its rows before they went into results.sqlite (schema v3)."""
        return place(self.root, "leakage.json")

    @property
    def legacy_base_checkpoint(self) -> Path:
        """Format 1's base model (roarfast.rundir.legacy)."""
        return place(self.root, "checkpoints", "base")

    @property
    def legacy_rank_root(self) -> Path:
        """Format 1's rank stores, `<method>/<split>` below it."""
        return place(self.root, "attributions")

    @property
    def legacy_dataset_path(self) -> Path:
        """Format 1's dataset record."""
        return place(self.root, "dataset.json")

    # --------------------------------------------------------------------------------------------- HEAD

    def head(self):
        """The latest request (roarfast.records.head.Head, verified): HEAD.json, or what a run directory of
        format 1 says of it (roarfast.rundir.legacy), or an empty Head in a new one."""
        stored = self.records.get(Head)
        return Head.from_record(stored) if stored is not None else legacy_head(self) or Head()

    def update_head(self, asked: str, **changes):
        """Records the latest request: HEAD with `changes` (dataset, base, ranks, configuration), stamped with the
        command the user ran (else `asked`), replaced atomically under the run directory's claim on it."""
        self.root.mkdir(parents=True, exist_ok=True)
        with self.claim("head"):
            head = updated(self.head(), asked, **changes)
            self.records.put(head)
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
        with hold_lock(place(self.claims_dir, f"{dir_name(what)}.lock"), waiting):  # a long method's name bounded
            yield

    # ------------------------------------------------------------------------------------- base models

    def model_path(self, model_id: str) -> Path:
        """The directory of the base model `model_id`: models/<id>, or format 1's checkpoints/base where that
        is the one (a run directory read as it is)."""
        return legacy_models(self).get(model_id) or self.model_dir(model_id)

    def models(self) -> dict:
        """{model id: directory} of every complete base model (its meta.json written), format 1's included."""
        found = {}
        if _folder(self.models_root):
            # a link at a model's folder is listed by its name, never read through (its meta refused: Records.get),
            # and a prune refuses it; one at a meta.json is no base model (the training that would replace it
            # refuses it)
            found = {p.name: p for p in sorted(self.models_root.iterdir()) if is_id(p.name) and (
                p.is_symlink() or (p / META).is_file() and not (p / META).is_symlink())}
        return {**legacy_models(self), **found}

    def model_meta(self, model_id: str | None) -> dict:
        """The verified meta.json of the base model `model_id` ({} when there is none); a UserError when it
        does not match its id (a directory renamed, a record edited): Records.get."""
        if model_id is None:
            return {}
        return self.records.get(ModelRecord, model_id, at=self.model_path(model_id) / META) or {}

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
        return ModelRecord.repair.format(run_dir=self.root)

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
        """(method, rank id, directory) of every rank store, format 1's included, sorted: the method is the one its
        manifests name, which is its folder's (a long name's folder bounded: RankStoreRecord.read). Nothing is read
        through a link: a store's folder that is one is listed by its names (a prune refuses it), a method's folder
        that is one is left out."""
        found = dict(legacy_ranks(self))
        if _folder(self.ranks_root):
            for method_dir in sorted(p for p in self.ranks_root.iterdir() if _folder(p)):
                for store in sorted(p for p in method_dir.iterdir() if is_id(p.name) and (_folder(p) or p.is_symlink())):
                    method = method_dir.name
                    for split in sorted(p for p in store.iterdir() if _folder(p)) if _folder(store) else ():
                        try:
                            method = (self.records.get(RankStoreRecord, at=split / MANIFEST) or {}).get("method",
                                                                                                        method)
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
        self.rank_record(method, rank_id, split, repair=f"`roarfast extract --force --method {method} --run-dir "
                                                         f"{self.root}` makes them again")
        stamp = record.manifest["checkpoint_sha256"]
        if current is None and stamp is not None:
            raise UserError(f"ranks in {record.directory} were made with base checkpoint sha256 {stamp}, but "
                            f"{self.model_path(base) if base else self.models_root} holds no model: restore it, or "
                            f"`roarfast train --run-dir {self.root}` and `roarfast extract --force --method {method} "
                            f"--run-dir {self.root}`")
        return record

    def rank_record(self, method: str, rank_id: str, split: str = "train", repair: str | None = None) -> dict | None:
        """The verified manifest of `method`'s ranks `rank_id` in `split` (None when there is none): refused in one
        line, naming `repair`, when it is not the store of that id (moved, edited)."""
        return self.records.get(RankStoreRecord, rank_id, at=self.rank_path(method, rank_id) / split / MANIFEST,
                                repair=repair)

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
        return self.ranks_for(self.rank_ids(selection, fingerprint, base)).incomplete(selection.names, splits)

    # ------------------------------------------------------------------------------------- stage times

    def record_stage_time(self, stage: str, value) -> None:
        """Merges one stage's seconds (a number, or {part: seconds} merged into earlier parts) into
        stages.json."""
        refuse_link(self.stage_times_path)  # before it is read: the write would be refused after the merge
        stages = self.stage_times() or {}  # a damaged one is begun anew: it holds only times
        stages[stage] = {**stages.get(stage, {}), **value} if isinstance(value, dict) else value
        self.records.put(StageTimes(stages))

    def stage_times(self) -> dict | None:
        """stages.json's content (verified), or None when no sweep recorded any, or when it is damaged (said in
        one line: the times are left out, nothing else depends on them)."""
        try:
            return self.records.get(StageTimes)
        except UserError as err:
            log.warning("note: the stage times are left out: %s", err)
            return None


def _folder(path: Path) -> bool:
    """Whether `path` is a folder of its own, not a link to one."""
    return path.is_dir() and not path.is_symlink()
