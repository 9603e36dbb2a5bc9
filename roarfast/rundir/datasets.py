"""The datasets a run directory used (`RunDatasets`, a part of roarfast.rundir.directory.RunDir): each one's record
in datasets/ (roarfast.records.dataset: sealed, read back only for the data its name gives) and HEAD's, what a
command loads when it names no dataset, and a recorded dataset loaded again and checked to be that data. A
recorded name is only a name: a plug-in is loaded where the user named it again or trusts the run directory
(roarfast.common.plugins.check_recorded)."""

from pathlib import Path

from roarfast.common.plugins import is_import_path
from roarfast.data import load_dataset
from roarfast.data.registry import DATASETS
from roarfast.errors import UserError
from roarfast.records.dataset import DatasetRecord
from roarfast.rundir.fallback import say_embedded_fallback
from roarfast.rundir.legacy import needs_migration


class RunDatasets:
    """The datasets of a RunDir (its `root`, `records`, `head()` and dataset paths)."""

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
        self.records.put(DatasetRecord(ds.fingerprint), record)
        return record

    def dataset_record(self, fingerprint: str | None = None) -> dict | None:
        """The record of the dataset of `fingerprint` (datasets/), else HEAD's dataset (name, data_dir, options,
        fingerprint), verified, or None."""
        if fingerprint is None:
            return self.head().dataset
        return self.records.get(DatasetRecord, fingerprint)

    def dataset_spec(self, name=None, data_dir=None, options=None) -> tuple:
        """(name, data_dir, options) to load: explicit arguments win; what `train` recorded fills in the rest
        when no dataset is named, or when the plug-in it records (an import path) is named again alone (no
        data_dir, no options); otherwise the embedded dataset with its defaults (a line says so where the run
        directory holds work: roarfast.rundir.fallback). A recorded name is only a name: a plug-in is loaded where the user named it again or trusts the run directory, and refused in one
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


def _recorded_dir(record: dict, path: Path) -> str | None:
    """The folder a dataset record (read from `path`) names, when it names one; a UserError when it is gone."""
    data_dir = record["data_dir"]
    if data_dir is not None and not Path(data_dir).exists():
        raise UserError(f"{path} records the data in {data_dir}, which does not exist (moved?): give its new place "
                        f"with --data-dir")
    return data_dir
