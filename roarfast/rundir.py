"""A run directory (`runs/<name>/`, laid out as below): the one object that knows where everything
in it lives. No other module spells one of these paths.

    checkpoints/base/   the base model (model.safetensors + meta.json; roarfast.checkpoint)
    attributions/       the rank store (roarfast.store)
    results.sqlite      every measurement (roarfast.results)
    stages.json         seconds per stage, merged by the sweep (the report's stage times)
    dataset.json        the dataset `train` used (name, absolute data_dir, options), so later commands
                        need no dataset flags
    report/             the report's default output
    claims/             one lock file per thing built once for every process (the base model, a method's
                        ranks): RunDir.claim (roarfast.claims)
    leakage.json        fill leakage before results schema v3; moved into results.sqlite when met

It also loads the base model for a dataset (refusing one trained on another dataset), reads ranks only
when they match the dataset and the current base model, checks that a stage can write before it spends
compute, and keeps the stage-time record. Every record it reads is verified (the checkpoint's weights and
meta, dataset.json and stages.json carry digests: roarfast.fingerprint.seal), the repair named in the one
line of a mismatch; every file it writes is replaced atomically, never through a link (roarfast.atomic).
"""

from contextlib import contextmanager
from pathlib import Path

from roarfast.atomic import check_writable, refuse_link, write_record
from roarfast.checkpoint import META, WEIGHTS
from roarfast.claims import hold_lock
from roarfast.errors import UserError
from roarfast.fingerprint import read_record

#: the format of dataset.json and stages.json: 2 since they are sealed with their digest (1: before, no field)
RECORD_FORMAT = 2


class RunDir:
    """The run directory at `root` (created by the first command that writes into it)."""

    def __init__(self, root):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunDir({str(self.root)!r})"

    # ------------------------------------------------------------------------------------------- paths

    @property
    def base_checkpoint(self) -> Path:
        return self.root / "checkpoints" / "base"

    @property
    def base_meta_path(self) -> Path:
        return self.base_checkpoint / META

    @property
    def rank_store_root(self) -> Path:
        return self.root / "attributions"

    @property
    def results_path(self) -> Path:
        return self.root / "results.sqlite"

    @property
    def stage_times_path(self) -> Path:
        return self.root / "stages.json"

    @property
    def dataset_path(self) -> Path:
        return self.root / "dataset.json"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def claims_dir(self) -> Path:
        return self.root / "claims"

    @property
    def legacy_fill_leakage_path(self) -> Path:
        """Where `roarfast leakage` wrote its rows before they went into results.sqlite (schema v3)."""
        return self.root / "leakage.json"

    @property
    def rank_store(self):
        """The rank store of this run directory (roarfast.store.RankStore)."""
        from roarfast.store import RankStore

        return RankStore(self.rank_store_root, run_dir=self.root)

    # ----------------------------------------------------------------------------------- writes, claims

    def check_writable(self, need_bytes: int = 0) -> None:
        """Refuses, before a stage spends compute, a run directory that cannot be created or written, or
        whose filesystem has less free space than the `need_bytes` the stage will write, or where a symbolic
        link stands at a record's place, or a hard link at results.sqlite's, which SQLite writes in place
        (atomic.refuse_link: no record is written through a link)."""
        check_writable(self.root, need_bytes, "--run-dir")
        for path in (self.dataset_path, self.stage_times_path, self.base_checkpoint / WEIGHTS, self.base_meta_path):
            refuse_link(path)
        for suffix in ("", "-wal", "-shm"):
            refuse_link(self.results_path.with_name(self.results_path.name + suffix), in_place=True)

    @contextmanager
    def claim(self, what: str, waiting=None):
        """Holds this run directory's claim on `what` (the base model, a method's ranks) while the body runs,
        so one process at a time builds it; another waits here (calling `waiting(holder)` once, holder: "pid
        N on HOST"), then finds it built. The claim is an exclusive lock on claims/<what>.lock, which the
        kernel releases when the holder exits or dies: a killed claimant's work is taken over at once, as a
        dead owner's cell is."""
        from roarfast.store.layout import dir_name

        self.claims_dir.mkdir(parents=True, exist_ok=True)
        with hold_lock(self.claims_dir / f"{dir_name(what)}.lock", waiting):  # a long method's name bounded
            yield

    # -------------------------------------------------------------------------------------- base model

    def base_meta(self) -> dict:
        """The base model's meta.json, or {} when there is none."""
        from roarfast.checkpoint import read_meta

        return read_meta(self.base_checkpoint, self._train_again)

    @property
    def _train_again(self) -> str:
        """The repair of a damaged base checkpoint."""
        return f"retrain the base model (`roarfast train --run-dir {self.root}`) or restore the file"

    def save_base_model(self, model, meta: dict) -> Path:
        from roarfast.checkpoint import save_checkpoint

        return save_checkpoint(self.base_checkpoint, model, meta)

    def check_base_model(self) -> None:
        """A UserError saying to train first when the run directory has no base model."""
        if not self.base_meta_path.exists():
            raise UserError(f"no base model in {self.base_checkpoint}: run `roarfast train --run-dir {self.root}` "
                            f"first")

    def load_base_model(self, ds, device="cpu"):
        """(model in eval mode on `device`, meta) of the base model, which must have been trained on `ds`
        (same fingerprint); a UserError saying what to do otherwise."""
        from roarfast.checkpoint import load_checkpoint

        self.check_base_model()
        model, meta = load_checkpoint(self.base_checkpoint, device=device, repair=self._train_again)
        if meta.get("dataset_fingerprint") != ds.fingerprint:
            raise UserError(f"the base model in {self.base_checkpoint} was trained on dataset "
                            f"{meta.get('dataset_fingerprint')} but this dataset is {ds.fingerprint}; retrain it or "
                            f"pick the matching --dataset")
        return model, meta

    def check_named_model(self, spec) -> None:
        """Refuses (one line) a --model naming another model than the one the base model records: a stage that
        loads the base model takes --model only to name it again (a plug-in the record names is imported only
        then: roarfast.plugins.check_recorded). Nothing is imported here."""
        from roarfast.models import MODELS
        from roarfast.resolver import BUILTIN

        recorded = self.base_meta().get("model")
        if spec is None or recorded is None:
            return
        query = MODELS.query(spec)
        named = query.entry.name if query.form == BUILTIN else query.text
        if named != recorded:
            raise UserError(f"--model {spec}: the base model in {self.base_checkpoint} is {recorded}; name that one "
                            f"(or none: --model only names the base model again here)")

    def base_checkpoint_sha256(self) -> str:
        """The hash of the base model's weights, verified against the one recorded when they were saved: what
        its ranks and no-retrain measurements are tied to."""
        from roarfast.checkpoint import checkpoint_sha256

        return checkpoint_sha256(self.base_checkpoint, self._train_again)

    # ------------------------------------------------------------------------------------------- ranks

    def read_ranks(self, method: str, split: str, dataset_fingerprint: str):
        """The ranks of (method, split) (a store.RankRecord, its rows verified as they are read), refused
        with both hashes and the remedy when made from another dataset or another base model than the one
        the run directory holds now: every reader of ranks reads them here."""
        current = self.base_checkpoint_sha256() if self.base_meta_path.exists() else None
        record = self.rank_store.read(method, split, dataset_fingerprint=dataset_fingerprint,
                                      checkpoint_sha256=current)
        stamp = record.manifest["checkpoint_sha256"]
        if current is None and stamp is not None:
            raise UserError(f"ranks in {record.directory} were made with base checkpoint sha256 {stamp}, but "
                            f"{self.base_checkpoint} holds no model: restore it, or `roarfast train --run-dir "
                            f"{self.root}` and `roarfast extract --force --method {method} --run-dir {self.root}`")
        return record

    def ranks_to_make(self, selection, splits) -> list[str]:
        """The methods of `selection` (a roarfast.methods.selection.Selection) whose ranks an extraction of
        `splits` would make: missing or incomplete in a split, or recorded with another provenance (parameters,
        arguments, code, seed, base checkpoint: Selection.ranks_change) than the selection makes now."""
        checkpoint = self.base_checkpoint_sha256() if selection.needs_model else None
        out = []
        for method in selection.names:
            manifests = (self.rank_store.manifest(method, split) for split in splits)  # read until one is to make
            if any(manifest is None or not manifest["complete"] or selection.ranks_change(method, manifest, checkpoint)
                   for manifest in manifests):
                out.append(method)
        return out

    # ----------------------------------------------------------------------------------------- dataset

    def remember_dataset(self, ds) -> None:
        """Records ds's name, options (defaults included; how it was read, e.g. streamed, too), the folder it
        was loaded from (ds.data_dir, set by load_dataset) as an absolute path, its fingerprint, canvas and image
        counts, replacing dataset.json atomically, sealed with its digest."""
        options = {**ds.options, **ds.read_options}
        data_dir = getattr(ds, "data_dir", None)
        record = {"name": ds.name, "data_dir": None if data_dir is None else str(Path(data_dir).expanduser().resolve()),
                  "options": {k: v for k, v in options.items() if k != "name"}, "fingerprint": ds.fingerprint,
                  # what a dry run shows without loading the data again
                  "shape": list(ds.train.shape), "images": {"train": len(ds.train), "test": len(ds.test),
                                                            "validation": len(ds.val_index)},
                  "ground_truth": ds.train.masks is not None}
        self.root.mkdir(parents=True, exist_ok=True)
        write_record(self.dataset_path, {**record, "format": RECORD_FORMAT})

    def dataset_record(self) -> dict | None:
        """What `train` recorded about the dataset (name, data_dir, options, fingerprint), verified, or None."""
        return _read_record(self.dataset_path, "restore it, or remove it and name the dataset again (--dataset, "
                                               "--data-dir, --data-option; `roarfast train` records it anew)")

    def dataset_spec(self, name=None, data_dir=None, options=None) -> tuple:
        """(name, data_dir, options) to load: explicit arguments win; what `train` recorded fills in the rest
        when no dataset is named, or when the plug-in it records (an import path) is named again alone (no
        data_dir, no options); otherwise the embedded dataset with its defaults. A recorded name is only a
        name: a plug-in is loaded where the user named it again or trusts the run directory, and refused in one
        line otherwise (roarfast.plugins.check_recorded)."""
        from roarfast.data.registry import DATASETS
        from roarfast.plugins import is_import_path

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
            if data_dir is None and record["data_dir"] is not None:
                data_dir = record["data_dir"]
                if not Path(data_dir).exists():
                    raise UserError(f"{self.dataset_path} records the data in {data_dir}, which does not exist "
                                    f"(moved?): give its new place with --data-dir")
            options = {**record["options"], **options}
        return name or "embedded", data_dir, options

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
        from roarfast.data import load_dataset

        name, data_dir, options = self.dataset_spec(name, data_dir, options)
        return load_dataset(name, data_dir, **options)

    # ------------------------------------------------------------------------------------- stage times

    def record_stage_time(self, stage: str, value) -> None:
        """Merges one stage's seconds (a number, or {part: seconds} merged into earlier parts) into
        stages.json."""
        refuse_link(self.stage_times_path)  # before it is read: the write would be refused after the merge
        stages = self.stage_times() or {}
        stages[stage] = {**stages.get(stage, {}), **value} if isinstance(value, dict) else value
        self.root.mkdir(parents=True, exist_ok=True)
        write_record(self.stage_times_path, {**stages, "format": RECORD_FORMAT})

    def stage_times(self) -> dict | None:
        """stages.json's content (verified), or None when no sweep recorded any."""
        return _read_record(self.stage_times_path, "remove it (the next sweep records the stage times again) or "
                                                   "restore it")


def _read_record(path: Path, repair: str) -> dict | None:
    """The verified content of a run-directory record (roarfast.fingerprint.read_record; its format field
    left out), or None when there is none; a UserError naming it and the `repair` when it is not JSON or
    does not match its digest."""
    record = read_record(path, repair, older=lambda record: "format" not in record)
    if record is not None:
        record.pop("format", None)
    return record
