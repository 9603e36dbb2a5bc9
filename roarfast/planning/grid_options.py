"""The grid a sweep runs, as the user asks for it (`GridOptions`): a preset and the parts the flags (or Study's
arguments) change, None leaving the preset's; `grid(first_seed)` is the checked Grid (roarfast.planning.grid).
Each field declares its flag (roarfast.common.options.flag): `roarfast sweep` builds its options from here, and
the --model, --recipe, --amp and --fill of the other commands are these flags with their own help.

Light on purpose (no torch): every --help builds its options from here.
"""

from dataclasses import dataclass

from roarfast.common.options import flag, parse_fractions, parse_list, parse_pairs, parse_seeds
from roarfast.fills import DEFAULT_FILL, FILLS
from roarfast.methods.registry import method_forms
from roarfast.models.registry import MODELS
from roarfast.modes import MODES
from roarfast.planning.grid import PRESETS, Grid, preset_grid
from roarfast.recipe import AMP_CHOICES, PLUGIN_SMALL_IMAGE, RECIPE_FIELDS


def model_help(text: str) -> str:
    """A --model help: `text` with {models} replaced by the forms --model takes and the built-ins (MODELS)."""
    return text.format(
        models=f"{MODELS.forms()}; the built-ins: {MODELS.listing()}; models other than the built-ins train with the "
               f"default recipe of their image size (up to {PLUGIN_SMALL_IMAGE} px or larger; README, 'Your model and "
               f"data'), --recipe changes it")


@dataclass(frozen=True)
class GridOptions:
    """A sweep's grid as asked for: `preset` ("quick" or "paper", PRESETS) and what changes it: `methods` (as
    --method, or what roarfast.methods.parse_methods takes), `fractions`, `modes` (a comma-separated text or a
    sequence), `seeds`, `control`, `control_seeds`, `fill`, `model`, `epochs`, `recipe` (Recipe fields), `amp`;
    None leaves the preset's. Checked when the grid is made (`grid`: the first seed bounds the last)."""

    preset: str = flag("--preset", default="quick", choices=lambda: list(PRESETS),
                       help="the grid: quick (what `roarfast run` uses) or paper (14 estimators x 5 fractions x "
                            "roar,kar x 5 seeds); the flags below override its parts")
    methods: object = flag("--method", help=lambda: method_forms() + " (default: the preset's)")
    fractions: object = flag("--fraction", multiple=True, parse=parse_fractions,
                             help="fractions removed (ROAR) or kept (KAR); repeat or comma-separate (default: the "
                                  "preset's)")
    modes: object = flag("--mode", help=f"{', '.join(MODES)} or {','.join(MODES)} (default: the preset's)")
    seeds: int | str | None = flag(
        "--seeds", parse=parse_seeds, metavar="N|auto",
        help="retrainings per cell, seeds --seed.., or `auto`: seeds added in stages only where a verdict is "
             "undecided, at the stated error rates (default: the preset's)")
    control: bool | None = flag("--control/--no-control", help="the mask-only control beside every cell (default: on)")
    control_seeds: int | None = flag(
        "--control-seeds", kind=int,
        help="controls for the first N seeds only (a control is tested against chance on the test split, which one "
             "seed allows; default: the preset's)")
    fill: str = flag("--fill", default=DEFAULT_FILL, choices=lambda: FILLS.names,
                     help=lambda: f"what replaces removed pixels: {FILLS.listing()}")
    model: object = flag("--model", help=lambda: model_help(
        "{models} (default: the base model's, else by dataset and device); trains the base model when the run "
        "directory has none, and every cell"))
    epochs: int | None = flag("--epochs", kind=int,
                              help="training epochs of each cell (default: the preset's, else the model's recipe)")
    recipe: dict | None = flag(
        "--recipe", kind=object, multiple=True, parse=parse_pairs, layered=True, metavar="FIELD=VALUE",
        help=f"training recipe field, repeatable (--recipe lr=0.02 --recipe ema_decay=null); fields: "
             f"{', '.join(RECIPE_FIELDS)}; a config file takes a `recipe:` mapping; wins over --epochs, --batch-size "
             f"and a preset's epochs")
    amp: str = flag("--amp", default="auto", choices=AMP_CHOICES,
                    help="mixed precision for training: bf16 autocast, or fp16 autocast with a gradient scaler (auto: "
                         "bf16 on GPU, fp32 on CPU)")

    def grid(self, first_seed: int = 0) -> Grid:
        """The preset's Grid with the parts given, its seeds from `first_seed` (preset_grid: each value checked,
        a UserError naming the flag)."""
        return preset_grid(self.preset, methods=self.methods,
                           fractions=None if self.fractions is None else tuple(self.fractions),
                           modes=parse_list(self.modes) if isinstance(self.modes, str) else self.modes,
                           seeds=self.seeds, control=self.control, control_seeds=self.control_seeds, fill=self.fill,
                           model=self.model, epochs=self.epochs, amp=self.amp, first_seed=first_seed,
                           recipe=self.recipe)
