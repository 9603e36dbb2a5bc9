"""What a run directory remembers about its dataset, so that `extract` and `retrain` after
`train --dataset cifar10 --data-dir X` need no repeated flags: `<run_dir>/dataset.json`."""

import json
from pathlib import Path

from roarfast.atomic import write_json

DATASET_FILE = "dataset.json"


def remember_dataset(run_dir, ds, data_dir=None) -> None:
    """Records ds's name, options (defaults included; how it was read, e.g. streamed, too) and data_dir,
    replacing the file atomically."""
    options = {**ds.options, **ds.read_options}
    record = {"name": ds.name, "data_dir": None if data_dir is None else str(data_dir),
              "options": {k: v for k, v in options.items() if k != "name"}, "fingerprint": ds.fingerprint}
    path = Path(run_dir) / DATASET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record)


def dataset_spec(run_dir, name=None, data_dir=None, options=None) -> tuple:
    """(name, data_dir, options) to load: explicit arguments win; otherwise what `train` recorded in
    run_dir; otherwise the embedded dataset with its defaults."""
    options = dict(options or {})
    path = Path(run_dir) / DATASET_FILE
    if name is None and path.exists():
        record = json.loads(path.read_text())
        name = record["name"]
        data_dir = data_dir if data_dir is not None else record["data_dir"]
        options = {**record["options"], **options}
    return name or "embedded", data_dir, options


def open_dataset(run_dir, name=None, data_dir=None, options=None):
    """load_dataset on dataset_spec(...)."""
    from roarfast.data import load_dataset

    name, data_dir, options = dataset_spec(run_dir, name, data_dir, options)
    return load_dataset(name, data_dir, **options)
