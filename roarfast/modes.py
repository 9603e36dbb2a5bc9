"""The modes: what a measurement does with the top `fraction` of an estimator's ranking. Every list of
mode names is defined here; the CLI's choices are built from it.

- Retraining cells (README, "Semantics"): roar removes the top fraction, kar keeps it and replaces
  the rest. A cell's mask-only control is the same cell trained and tested on the removal pattern alone;
  its mode is the cell's with CONTROL_SUFFIX ("roar-mask", "kar-mask").
- No-retrain evaluations (roarfast.stages.noretrain): the base model as the most- (morf) or least-relevant-first (lerf)
  fraction is replaced; `road` is both with the road fill, ROAD's imputation (road-morf, road-lerf).
- Fill leakage (roarfast.stages.fill_leakage): a per-pixel detector finds the pixels a ROAR fraction removed (detect).

Light on purpose (no torch): the CLI imports it to build its options.
"""

from roarfast.errors import UserError
from roarfast.fills import DEFAULT_FILL, ROAD_FILL

ROAR, KAR = "roar", "kar"
#: the modes of a retraining cell
MODES = (ROAR, KAR)
#: a mode with this suffix is the mask-only control of the cell of the mode without it
CONTROL_SUFFIX = "-mask"
#: in ROAR a better estimator leaves a lower accuracy; in KAR a higher one
LOWER_IS_BETTER = {ROAR: True, KAR: False}


def control_mode(mode: str) -> str:
    """The mode of the mask-only control of a `mode` cell: roar -> roar-mask."""
    return mode + CONTROL_SUFFIX


def is_control(mode: str) -> bool:
    return mode.endswith(CONTROL_SUFFIX)


def cell_mode(mode: str) -> str:
    """The mode of the cell a mode belongs to: roar-mask -> roar, kar -> kar."""
    return mode.removesuffix(CONTROL_SUFFIX)


def mode_of(keep: bool, control: bool = False) -> str:
    """The mode of a cell that keeps (KAR) or removes (ROAR) the top fraction, or of its control."""
    mode = KAR if keep else ROAR
    return control_mode(mode) if control else mode


CONTROL_MODES = tuple(control_mode(m) for m in MODES)
#: every mode of a retraining: the cells, then their controls
RETRAIN_MODES = MODES + CONTROL_MODES

#: --metric of the no-retrain evaluation -> its modes: (mode, least relevant first?, fill)
NO_RETRAIN_METRICS = {
    "morf": (("morf", False, DEFAULT_FILL),),
    "lerf": (("lerf", True, DEFAULT_FILL),),
    ROAD_FILL: (("road-morf", False, ROAD_FILL), ("road-lerf", True, ROAD_FILL)),
}
#: the no-retrain modes, in reading order
NO_RETRAIN_MODES = tuple(mode for modes in NO_RETRAIN_METRICS.values() for mode, _, _ in modes)

#: the mode of a fill-leakage measurement: a detector finds the pixels a ROAR fraction removed
DETECT = "detect"


def check_modes(modes) -> tuple:
    """`modes` as a tuple when they are cell modes (roar, kar, at least one); a UserError otherwise."""
    modes = tuple(modes)
    if not modes or any(m not in MODES for m in modes):
        raise UserError(f"--mode: modes are {' and '.join(MODES)}, got {','.join(modes) or 'none'}")
    return modes
