"""roarfast: the ROAR interpretability benchmark (RemOve And Retrain), end to end, fast.

`import roarfast` stays free of torch so that the `roarfast` CLI answers `--help` at once; `roarfast.Study`
(a study from Python: roarfast.study), `roarfast.compare` (configurations side by side:
roarfast.report.compare) and `roarfast.plot` (figures from a results frame) are imported when first used.
The custom ops (roarfast._C) load with `roarfast.ops`, which every computing module imports;
a missing or mismatched build fails there with the command that fixes it.
"""

import importlib

from roarfast.version import __version__  # noqa: F401  (roarfast.__version__)


def __getattr__(name):
    if name == "ops":
        return importlib.import_module("roarfast.ops")
    if name == "Study":
        return importlib.import_module("roarfast.study").Study
    if name == "compare":
        return importlib.import_module("roarfast.report.compare").compare
    if name == "plot":
        return importlib.import_module("roarfast.plot")
    raise AttributeError(f"module 'roarfast' has no attribute {name!r}")
