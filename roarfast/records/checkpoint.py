"""Model checkpoints: weights in `model.safetensors` (nothing is unpickled on load) and everything else
in `meta.json` (model name, its factory's source hash and shape arguments to rebuild it, dataset
fingerprint, accuracies, recipe, versions). Both files are written to temporary names and renamed into place.
Weights trained elsewhere enter through `read_state_dict` (safetensors, or a torch file loaded with
weights_only=True: no code runs) and `fit_state_dict` (strict: every key, every shape).

Both are verified by every reader: meta.json records the sha256 of the weights (`weights_sha256`) and is
sealed with the sha256 of itself (`record_sha256`, roarfast.common.fingerprint.seal); a weights file or a meta that
does not match is refused with one line naming the file and the repair, so a damaged checkpoint is never
loaded, and new ranks are never stamped with a damaged file's hash. A checkpoint saved before digests (a
meta with neither field) is read unverified, with a note."""

import hashlib
import logging
import re
from pathlib import Path

from roarfast.common.atomic import replace_bytes, write_record
from roarfast.errors import UserError
from roarfast.common.fingerprint import read_record, sha256_file
from roarfast.models import resolve_model
from roarfast.models.spec import check_source

log = logging.getLogger(__name__)

WEIGHTS = "model.safetensors"
META = "meta.json"
#: meta keys load_checkpoint needs to rebuild the model
REQUIRED_META = ("model", "num_classes", "image_size", "in_channels")
#: the meta key holding the sha256 of the weights file, written by save_checkpoint
WEIGHTS_DIGEST = "weights_sha256"
#: what repairs a damaged checkpoint, where the caller names no run directory
TRAIN_AGAIN = "train the model again (`roarfast train`) or restore the file"

#: weights files read unverified in this process (saved before digests; the note is said once)
_NOTED_UNVERIFIED = set()


def weights_bytes(model, name: str) -> bytes:
    """The bytes of `model`'s weights file as save_checkpoint writes it for the model `name`: its sha256 is the
    weights' digest (WEIGHTS_DIGEST)."""
    from safetensors.torch import save

    # contiguous copies: safetensors stores dense row-major tensors (channels_last weights are not)
    state = {key: tensor.detach().to("cpu").contiguous() for key, tensor in model.state_dict().items()}
    return save(state, metadata={"model": name})


def save_checkpoint(directory, model, meta: dict) -> Path:
    """Writes model's state dict and `meta` (which must hold REQUIRED_META; the weights' sha256 is added as
    WEIGHTS_DIGEST) into `directory`; returns it."""
    missing = [key for key in REQUIRED_META if key not in meta]
    if missing:
        raise ValueError(f"meta should have the keys {', '.join(REQUIRED_META)}; missing {', '.join(missing)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data = weights_bytes(model, meta["model"])
    # written by Python, so a full disk or a read-only directory is an OSError naming the file; the weights
    # first: a kill between the two leaves a meta whose digest the new weights do not match (refused)
    replace_bytes(directory / WEIGHTS, data)
    write_record(directory / META, {**meta, WEIGHTS_DIGEST: hashlib.sha256(data).hexdigest()}, indent=2)
    return directory


def load_checkpoint(directory, device="cpu", repair: str = TRAIN_AGAIN):
    """(model in eval mode on `device`, meta dict) from a directory written by save_checkpoint, both files
    verified (a UserError naming the damaged one and the `repair` otherwise)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    for name in (WEIGHTS, META):
        if not (directory / name).is_file():
            raise UserError(f"no checkpoint in {directory}: {name} is missing (expected {WEIGHTS} and {META})")
    meta = read_meta(directory, repair)
    missing = [key for key in REQUIRED_META if key not in meta]
    if missing:
        raise UserError(f"{directory / META} lacks {', '.join(missing)}")
    # hashed, then memory-mapped: one more read from the page cache costs less than a copy of the bytes
    _check_weights(directory, meta, sha256_file(directory / WEIGHTS), repair)
    model = recorded_model(meta, directory).build(meta["num_classes"], meta["image_size"], meta["in_channels"])
    try:
        state = load_file(str(directory / WEIGHTS))
    except SafetensorError as err:
        raise UserError(f"{directory / WEIGHTS} cannot be read ({err}): it is truncated or damaged; {repair}") from None
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:  # a factory or object that now builds another network
        raise UserError(f"--model {meta['model']}: the network it builds now does not fit the weights in "
                        f"{directory / WEIGHTS} ({str(err).splitlines()[0]})") from None
    return model.to(device).eval(), meta


def recorded_model(meta: dict, where):
    """The ModelSpec that rebuilds the model a checkpoint's meta (in the directory `where`) records, refused
    (both hashes named) when its factory's source changed since (roarfast.models.check_source). The record is a
    name: an import path is imported only where the user named it again or trusts the run directory
    (roarfast.common.plugins.check_recorded)."""
    spec = resolve_model(meta["model"], recorded_in=Path(where) / META)
    check_source(spec, meta.get("model_source_sha256"), where)
    return spec


def read_meta(directory, repair: str = TRAIN_AGAIN) -> dict:
    """The verified meta.json of the checkpoint in `directory` ({} when there is none); a UserError naming it
    and the `repair` when it is not JSON or does not match its digest."""
    return read_record(Path(directory) / META, repair, older=lambda meta: WEIGHTS_DIGEST not in meta) or {}


def checkpoint_sha256(directory, repair: str = TRAIN_AGAIN) -> str:
    """sha256 hex of the weights file, checked against the one meta.json recorded when it was saved:
    identifies the model whose attributions a rank store holds (a damaged file is refused, never stamped)."""
    directory = Path(directory)
    if not (directory / WEIGHTS).is_file():  # a meta without its weights: removed, or a copy left half
        raise UserError(f"no checkpoint in {directory}: {WEIGHTS} is missing beside {META}; {repair}")
    digest = sha256_file(directory / WEIGHTS)
    _check_weights(directory, read_meta(directory, repair), digest, repair)
    return digest


def _check_weights(directory: Path, meta: dict, digest: str, repair: str) -> None:
    """A UserError naming the weights file when `digest` (its sha256) is not the one `meta` recorded; a note,
    once, when meta recorded none (saved before digests)."""
    expected = meta.get(WEIGHTS_DIGEST)
    path = directory / WEIGHTS
    if expected is None:
        if path not in _NOTED_UNVERIFIED:
            _NOTED_UNVERIFIED.add(path)
            log.warning("note: %s was saved before roarfast recorded the weights' sha256: it is read unverified",
                        path)
    elif digest != expected:
        raise UserError(f"{path} does not match the sha256 recorded in {directory / META} when it was saved (the "
                        f"file changed on disk: damaged, truncated or replaced); {repair}")


#: how a torch file begins: a zip archive (torch.save since 1.6), or a pickle (older torch.save)
_TORCH_MAGIC = (b"PK\x03\x04", b"\x80")


def read_state_dict(path, flag: str = "--weights") -> dict:
    """{name: Tensor} of a state-dict file: safetensors (read without running code), or a torch file (torch.save)
    loaded with weights_only=True (tensors and plain containers only: no code runs). A UserError naming `flag`,
    the file and the remedy when it is missing, unreadable, needs code to load or holds anything but tensors by
    name."""
    # late: loads torch, and --help imports this module
    import torch

    path = Path(path).expanduser()
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as err:
        raise UserError(f"{flag} {path}: cannot be read ({err.strerror or err})") from None
    if head.startswith(_TORCH_MAGIC):
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001  (the file's fault, whatever torch raises)
            raise UserError(f"{flag} {path}: torch.load(weights_only=True) refused it ({_load_refusal(err)}): save "
                            f"the state dict alone (torch.save(model.state_dict(), path)) or as safetensors") from None
    else:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as err:
            raise UserError(f"{flag} {path}: neither a safetensors file nor a torch file ({err}); give a state dict "
                            f"saved by safetensors or torch.save") from None
    if not isinstance(state, dict) or not state:
        raise UserError(f"{flag} {path}: holds {type(state).__name__ if state else 'nothing'}, not a state dict "
                        f"({{name: tensor}}): save model.state_dict()")
    wrong = next(((key, value) for key, value in state.items()
                  if not isinstance(key, str) or not isinstance(value, torch.Tensor)), None)
    if wrong is not None:
        raise UserError(f"{flag} {path}: its entry {wrong[0]!r} is not a tensor ({type(wrong[1]).__name__}): a "
                        f"checkpoint that wraps the state dict? save the state dict alone (model.state_dict())")
    return state


def fit_state_dict(model, state: dict, path, what: str, flag: str = "--weights") -> None:
    """Loads `state` into `model` strictly: a UserError naming `flag`, the file, `what` the model is, and the first
    missing key, the first unexpected key and the first shape that differs (with how many more of each), before
    anything is loaded."""
    expected = model.state_dict()
    missing = [key for key in expected if key not in state]
    unexpected = [key for key in state if key not in expected]
    shapes = [(key, list(state[key].shape), list(expected[key].shape)) for key in expected
              if key in state and state[key].shape != expected[key].shape]

    def more(items):
        return f" (and {len(items) - 1} more)" if len(items) > 1 else ""

    problems = ([f"missing key {missing[0]!r}{more(missing)}"] if missing else []) + (
        [f"unexpected key {unexpected[0]!r}{more(unexpected)}"] if unexpected else []) + (
        [f"{shapes[0][0]!r} is {shapes[0][1]} in the file, {shapes[0][2]} in the model{more(shapes)}"] if shapes else [])
    if problems:
        raise UserError(f"{flag} {path} does not fit {what}: {'; '.join(problems)}")
    model.load_state_dict(state, strict=True)


def _load_refusal(err: Exception) -> str:
    """Why torch.load refused a file, in a few words: the global it would have to import (weights_only), else the
    first line of its message."""
    text = str(err)
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if found:
        return f"it holds a {found.group(1)}, which only code can rebuild"
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__
