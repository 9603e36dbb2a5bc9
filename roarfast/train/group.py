"""Several models trained at once by one loop (cells trained together): each run has its own seed
(initialization, data order, augmentation), its own masking and fill, its own model selection and its own
result, exactly as if trained alone. How the loop advances them (`Grouping.how`):

- "loop": each model its own state, stepped in turn; bit-identical to training each alone;
- "fused": the models as one network (roarfast.train.fused), equal to alone up to floating point;
- "streams": as "loop", each state's steps on its own CUDA stream (on a CPU, the loop itself);

and `Grouping.compile` runs each step's network through torch.compile. A run whose set-up or training
fails ends alone: the others go on (a fused group that fails is trained again as a loop, so that the
failure is pinned on its run).
"""

import time
from dataclasses import dataclass

import torch

from roarfast.errors import UserError
from roarfast.models import resolve_model
from roarfast.common.options import check_choice, check_positive
from roarfast.common.progress import progress_bar
from roarfast.recipe import Recipe
from roarfast.train.classifier import TrainResult, new_member
from roarfast.train.evaluation import selected_test_accs
from roarfast.train.fused import NotFusable, fuse
from roarfast.train.loop import Steps, train_states
from roarfast.train.masking import Masking
from roarfast.train.parallel import distributed
from roarfast.train.state import new_state
from roarfast.train.streams import new_stream

IMPLEMENTATIONS = ("loop", "fused", "streams")
#: torch.compile modes (reduce-overhead: CUDA graphs)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class Grouping:
    """How cells train together: `size` at most per group, advanced as `how` says (IMPLEMENTATIONS), each
    step compiled with torch.compile's `compile` mode (None: eager)."""

    size: int = 1
    how: str = "loop"
    compile: str | None = None

    def __post_init__(self):
        check_positive("--group-size", self.size)
        check_choice("group implementation", self.how, IMPLEMENTATIONS)
        if self.compile is not None:
            check_choice("group compile mode", self.compile, COMPILE_MODES)


#: what a device trains by default (its size when --group-size is not given, its way when it is), from
#: benchmarks/RESULTS.md ("cells trained together"). CPU: a loop of states runs at one at a time's speed
#: (0.98-1.01x), fused networks slower (0.71x at K = 2, 0.45x at K = 8: K activations overflow the cache),
#: compiled steps too (0.73-0.84x): one at a time, and a loop when asked for more. GPU (an H200, airbench):
#: K = 2-16 together ran at 0.89-1.09x one at a time by a loop or streams, fused slower (0.65-0.94x): the same
DEFAULT_GROUPING = {"cpu": Grouping(size=1, how="loop"), "cuda": Grouping(size=1, how="loop")}


def default_grouping(device, size: int | None = None) -> Grouping:
    """The device's default Grouping, with `size` cells a group when given."""
    chosen = DEFAULT_GROUPING.get(torch.device(device).type, Grouping())
    return chosen if size is None else Grouping(size=size, how=chosen.how, compile=chosen.compile)


@dataclass(frozen=True)
class Run:
    """One model of a group: its training seed and its masking (None: the unmodified images)."""

    seed: int
    masking: Masking | None = None


def train_group(dataset, model, recipe: Recipe, device, runs: list, grouping: Grouping = Grouping(),
                progress: bool = False) -> list:
    """Trains a `model` (what resolve_model takes) per Run of `runs` together, as `grouping` says; returns per
    run its TrainResult, or the exception that ended it. A result's `seconds` is its share of the group's
    wall time: the time from the first set-up to the last test, divided by the runs that finished.
    UserError and KeyboardInterrupt end the whole group."""
    architecture = resolve_model(model)
    device = torch.device(device)
    started = time.perf_counter()
    rank, world = distributed()
    steps = Steps.of(dataset, recipe, world)
    outcomes = [None] * len(runs)
    members = {}
    for i, run in enumerate(runs):
        try:
            members[i] = new_member(dataset, architecture, recipe, device, run.seed, run.masking)
        except (KeyboardInterrupt, UserError):
            raise
        except Exception as err:  # noqa: BLE001  (this run's error: the group goes on without it)
            outcomes[i] = err
    states = _states(members, grouping, dataset, recipe, device, steps.total)
    failed = {}
    with progress_bar(total=steps.total * steps.batch_size * len(members), desc=f"train {architecture.name} "
                      f"x{len(members)}", unit="img", enabled=progress and rank == 0) as bar:
        train_states([state for state, _ in states], dataset, recipe, steps, bar, failed=failed)
    for state, indices in states:
        if state not in failed:
            how = "fused" if len(indices) > 1 else "streams" if state.stream is not None else "loop"
            _test(state, indices, dataset, recipe, outcomes, failed,
                  how + (f"+{grouping.compile}" if grouping.compile else ""))
        if state in failed and len(indices) > 1:  # fused: trained again one by one, so the failure finds its run
            alone = train_group(dataset, architecture, recipe, device, [runs[i] for i in indices],
                                Grouping(size=len(indices), how="loop", compile=grouping.compile))
            for i, outcome in zip(indices, alone):
                outcomes[i] = outcome
        elif state in failed:
            outcomes[indices[0]] = failed[state]
    finished = [o for o in outcomes if isinstance(o, TrainResult)]
    share = (time.perf_counter() - started) / max(1, len(finished))
    for result in finished:
        result.seconds = share
    return outcomes


def _states(members: dict, grouping: Grouping, dataset, recipe: Recipe, device, total_steps: int) -> list:
    """[(TrainState, [run index of each of its members])]: one state of all members fused, when asked and
    possible, else one per member (on its own stream with how="streams")."""
    indices = list(members)
    if grouping.how == "fused" and len(indices) > 1 and distributed()[1] == 1:
        try:
            net = fuse([members[i].net for i in indices], dataset.channels, dataset.image_size)
        except NotFusable:
            net = None  # trained as a loop: the same results, one network after another
        if net is not None:
            return [(new_state(net, [members[i] for i in indices], recipe, device, total_steps, grouping.compile),
                     indices)]
    states = []
    for i in indices:
        state = new_state(members[i].net, [members[i]], recipe, device, total_steps, grouping.compile)
        if grouping.how == "streams":
            state.stream = new_stream(device)
        states.append((state, [i]))
    return states


def _test(state, indices: list, dataset, recipe: Recipe, outcomes: list, failed: dict, how: str) -> None:
    """Each member's test accuracy with its selected weights into `outcomes` (a failure into `failed`), each
    result saying it was trained `how`."""
    try:
        accuracies = selected_test_accs(state, torch.arange(len(dataset.test)))
    except (KeyboardInterrupt, UserError):
        raise
    except Exception as err:  # noqa: BLE001  (this state's error: the others keep their results)
        failed[state] = err
        return
    for i, member, test_acc in zip(indices, state.members, accuracies):
        outcomes[i] = member.result(test_acc, recipe.epochs, 0.0, trained_as=how)
