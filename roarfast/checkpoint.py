"""Model checkpoints: weights in `model.safetensors` (nothing is unpickled on load) and everything else
in `meta.json` (model name, its factory's source hash and shape arguments to rebuild it, dataset
fingerprint, accuracies, recipe, versions). Both files are written to temporary names and renamed into place."""

import json
from pathlib import Path

from roarfast.atomic import replace_file, write_json
from roarfast.fingerprint import sha256_file

WEIGHTS = "model.safetensors"
META = "meta.json"
#: meta keys load_checkpoint needs to rebuild the model
REQUIRED_META = ("model", "num_classes", "image_size", "in_channels")


def save_checkpoint(directory, model, meta: dict) -> Path:
    """Writes model's state dict and `meta` (which must hold REQUIRED_META) into `directory`; returns it."""
    from safetensors.torch import save

    missing = [key for key in REQUIRED_META if key not in meta]
    if missing:
        raise ValueError(f"meta should have the keys {', '.join(REQUIRED_META)}; missing {', '.join(missing)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # contiguous copies: safetensors stores dense row-major tensors (channels_last weights are not)
    state = {name: tensor.detach().to("cpu").contiguous() for name, tensor in model.state_dict().items()}
    data = save(state, metadata={"model": meta["model"]})
    # written by Python, so a full disk or a read-only directory is an OSError naming the file
    replace_file(directory / WEIGHTS, lambda tmp: tmp.write_bytes(data))
    write_json(directory / META, meta, indent=2)
    return directory


def load_checkpoint(directory, device="cpu"):
    """(model in eval mode on `device`, meta dict) from a directory written by save_checkpoint."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from roarfast.errors import UserError

    directory = Path(directory)
    for name in (WEIGHTS, META):
        if not (directory / name).is_file():
            raise UserError(f"no checkpoint in {directory}: {name} is missing (expected {WEIGHTS} and {META})")
    meta = read_meta(directory)
    missing = [key for key in REQUIRED_META if key not in meta]
    if missing:
        raise UserError(f"{directory / META} lacks {', '.join(missing)}")
    model = recorded_model(meta, directory).build(meta["num_classes"], meta["image_size"], meta["in_channels"])
    try:
        state = load_file(str(directory / WEIGHTS))
    except SafetensorError as err:
        raise UserError(f"{directory / WEIGHTS} cannot be read ({err}): it is truncated or damaged; train the model "
                        f"again (`roarfast train`) or restore the file") from None
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:  # a factory or object that now builds another network
        raise UserError(f"--model {meta['model']}: the network it builds now does not fit the weights in "
                        f"{directory / WEIGHTS} ({str(err).splitlines()[0]})") from None
    return model.to(device).eval(), meta


def recorded_model(meta: dict, where):
    """The ModelSpec that rebuilds the model a checkpoint's meta records, refused (both hashes named) when its
    factory's source changed since (roarfast.models.check_source)."""
    from roarfast.models import resolve_model
    from roarfast.models.spec import check_source

    spec = resolve_model(meta["model"])
    check_source(spec, meta.get("model_source_sha256"), where)
    return spec


def read_meta(directory) -> dict:
    """The meta.json of the checkpoint in `directory` ({} when there is none); a UserError naming it when it
    is not JSON."""
    from roarfast.errors import UserError

    path = Path(directory) / META
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise UserError(f"{path} is not valid JSON ({err}): train the model again (`roarfast train`) or restore "
                        f"the file") from None


def checkpoint_sha256(directory) -> str:
    """sha256 hex of the weights file: identifies the model whose attributions a rank store holds."""
    return sha256_file(Path(directory) / WEIGHTS)
