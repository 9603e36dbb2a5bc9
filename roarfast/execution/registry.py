"""The executors by name (`EXECUTORS`, on the resolver idiom: roarfast.common.resolver) and `make_executor`, the one
place where the user's --executor (or Study's executor=) becomes an Executor object; the stages receive that object.

A new backend (Dask, a Slurm array) is one module of roarfast.execution with an Executor subclass (and a
`from_options` that reads its own options), its entry below, and its test. Light on purpose (no torch): the
CLI builds --executor's choices and help from here; a backend's module is imported when it is made.
"""

from roarfast.common.options import check_choice
from roarfast.common.resolver import Entry, Resolver
from roarfast.errors import UserError
from roarfast.stages.executor import Executor

#: the executor of a stage given none
DEFAULT_EXECUTOR = "local"

EXECUTORS = Resolver("executor", "--executor", [
    Entry("local", "in this process (or, on a CPU, cells side by side in single-thread processes)",
          target="roarfast.execution.local:LocalExecutor", order=0),
    Entry("ray", "on a Ray cluster: each chunk of a split's images and each retraining cell a task",
          target="roarfast.execution.ray_executor:RayExecutor", order=1),
])


def make_executor(spec=None, options=None, *, flag: str = "--executor") -> Executor:
    """The Executor `spec` names (a name of EXECUTORS; None: the local one), made with `options` (the backend's
    own: for ray a RayOptions or a dict of its fields; a backend without options ignores them); an Executor
    object is taken as it is. A UserError, naming `flag`, for a name that is none."""
    if isinstance(spec, Executor):
        return spec
    name = DEFAULT_EXECUTOR if spec is None else spec
    if not isinstance(name, str):
        raise UserError(f"{flag} should be one of {', '.join(EXECUTORS.names)} or an Executor, got "
                        f"{type(name).__name__}")
    check_choice(flag, name.strip(), EXECUTORS.names)
    return EXECUTORS.load(name.strip()).from_options(options)
