"""The dataset a command or a Study works on, as the user names it (`DataOptions`: --dataset, --data-dir,
--data-option), each field declaring its flag (roarfast.common.options.flag), so the CLI builds its options from
here and Study builds the same object; the stages load what it names (roarfast.data.registry.load_dataset, or the
run directory's record when no dataset is named).

Light on purpose (no torch): every --help builds its options from here.
"""

from dataclasses import dataclass
from pathlib import Path

from roarfast.common.options import flag, parse_pairs
from roarfast.data.registry import DATASETS


def dataset_help() -> str:
    """--dataset's help: the forms it takes and the built-ins (DATASETS) with their options."""
    builtins = "; ".join(f"{entry.name}: {entry.description}"
                         + (f" (--data-option {', '.join(entry.options)})" if entry.options else "")
                         for entry in DATASETS)
    return (f"{DATASETS.forms()}; the built-ins: {builtins}  [default: what `train` recorded in the run directory, "
            f"else embedded]")


@dataclass(frozen=True)
class DataOptions:
    """`dataset`: what --dataset takes (from Python also what load_dataset takes: a factory, the data itself);
    None: the run directory's latest, else the embedded one. `data_dir`: the files' root. `options`: the loader's
    options, as --data-option gives them ({name: value})."""

    dataset: object = flag("--dataset", help=dataset_help)
    data_dir: Path | None = flag("--data-dir", kind=Path,
                                 help="dataset root (CIFAR or torchvision on-disk format, a JPEG tree with train/ and "
                                      "val/ or test/, or a factory's data_dir)")
    # kind object: a config file's mapping reaches parse_pairs whole (text would stringify it)
    options: dict = flag(
        "--data-option", default={}, kind=object, multiple=True, parse=parse_pairs, metavar="KEY=VALUE",
        help="loader option, repeatable: every dataset num_train/num_test (a seeded subset, each class in "
             "proportion; embedded generates that many), embedded seed/copies; cifar download=true; imagefolder "
             "resize/crop (default: the images' own size when they share one, else 256/224), skip_bad/device/stream "
             "(stream=auto|true|false: decode batch by batch from disk instead of holding the canvases in memory); "
             "torchvision:<Class> and a factory: their own keyword arguments")

    def __post_init__(self):
        object.__setattr__(self, "options", dict(self.options or {}))

    def stage_arguments(self) -> dict:
        """The keyword arguments a stage takes from these: dataset, data_dir, dataset_options."""
        return {"dataset": self.dataset, "data_dir": self.data_dir, "dataset_options": self.options}
