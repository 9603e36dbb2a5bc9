"""The estimators of one stage, resolved once where it begins (`Selection`): their records, the parameter
values they read, how their maps are ranked, and what makes each one's ranks what they are
(`ranks_identity`, the identity a rank store records and is compared by). The stages, the grid and the
planners take a Selection; none looks a name up again.

    selection = Selection.resolve("sg-sq,random", ExtractOptions(samples=8), seed=0)
    selection.names                    # ['sg-sq-grad', 'random']
    selection.ranks_identity("random")  # {'code': {...}, 'granularity': 'pixel', 'parameters': {}, ..., 'seed': 0}
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass

from roarfast.errors import UserError
from roarfast.common.fingerprint import canonical_json
from roarfast.methods.declaration import Estimator
from roarfast.methods.parameters import PARAMETERS
from roarfast.methods.params import MethodParams, black_baseline
from roarfast.methods.registry import check_arguments, resolve_methods
from roarfast.recipe import autocast_dtype


@dataclass(frozen=True)
class Selection:
    """Resolved estimators and the values they run with.

    Attributes:
        records: {canonical name: Estimator record}, in the order asked for (what each reads, whether it uses
            the model, draws random numbers or reads ground-truth masks, its code identity).
        values: the shared parameters' values (PARAMETERS: the options' fields, then the --method-arg values
            that name them).
        args: the --method-arg values (NAME=VALUE) that some estimator of the selection takes.
        granularity: what is ranked: "pixel" (channels reduced) or "value" (every C*H*W value).
        reduction: how ranking folds a map's channels: the options' reduction, or "value" when every value is
            ranked.
        seed: the run's seed (recorded by the estimators that draw random numbers).
        compute_batch: the images the estimators take at once where the request sets it, else None (the device's
            default: roarfast.methods.batches).
    """

    records: Mapping[str, Estimator]
    values: Mapping[str, object]
    args: Mapping[str, object]
    granularity: str
    reduction: str
    seed: int = 0
    compute_batch: int | None = None

    @classmethod
    def resolve(cls, methods, options, seed: int = 0) -> "Selection":
        """The selection of `methods` (what parse_methods takes: names, comma-separated text, functions) with
        the values of `options`, an ExtractOptions (any object with a field per PARAMETERS and RANKING entry and
        `method_args`). Refuses (UserError) an unknown method, a --method-arg none of them takes and an
        argument one of them cannot run without."""
        try:
            records = resolve_methods(methods)
        except ValueError as err:
            raise UserError(str(err)) from None
        return cls.of(records, options, seed)

    @classmethod
    def of(cls, records: Mapping[str, Estimator], options, seed: int = 0) -> "Selection":
        """The selection of records already resolved ({name: Estimator}, as resolve_methods gives them), checked
        as `resolve` checks them."""
        args = dict(options.method_args)
        check_arguments(records.values(), args)
        values = {name: args.get(name, getattr(options, name)) for name in PARAMETERS}
        reduction = "value" if options.granularity == "value" else options.reduction
        return cls(dict(records), values, args, options.granularity, reduction, seed, options.compute_batch)

    @property
    def names(self) -> list[str]:
        return list(self.records)

    @property
    def explained(self) -> list[str]:
        """The methods that explain the model (read its gradients or outputs): their ranks depend on it."""
        return [name for name, record in self.records.items() if record.uses_model]

    @property
    def model_free(self) -> list[str]:
        """The methods whose ranks ignore the model (random, sobel, oracle): stored without a checkpoint hash,
        computed without loading one."""
        return [name for name, record in self.records.items() if not record.uses_model]

    @property
    def needs_model(self) -> bool:
        return bool(self.explained)

    def only(self, names) -> "Selection":
        """This selection narrowed to `names` (a subset of its names, in that order), with the --method-arg
        values those take; each keeps its identity."""
        records = {name: self.records[name] for name in names}
        args = {k: v for k, v in self.args.items() if any(r.takes(k) for r in records.values())}
        return Selection(records, self.values, args, self.granularity, self.reduction, self.seed, self.compute_batch)

    def ranks_identity(self, name: str) -> dict:
        """The identity of method `name`'s ranks, as JSON-able data (canonical: sorted keys, lists): what makes
        them what they are, read from its record (never from its name). Two extractions with equal identities
        (and the same base checkpoint, for a method that uses the model, and the same dataset fingerprint, both
        added by the caller) make the same ranks; a rank store records it as its manifest's `params`, and a
        resumed or reused store must record the same (ranks_change).

        Keys: `parameters`, each parameter it reads with its value and the arguments it was given; `code`, the
        identity of its code; `seed`, only where it draws random numbers (so a new seed reuses e.g. sobel's
        ranks), with `keying`, how its draws are keyed (Estimator.keying; absent where a store was keyed per
        batch, or for random, keyed per image from the start); `granularity` and `reduction`, how its maps are
        ranked; `compute_batch`, only where the request set it (the device's default is not recorded, so stores
        made before it existed keep their ids). Nothing else changes the bytes on one device kind and thread
        count: not the chunks, the passes, the executor or the workers (roarfast.methods.batches)."""
        record = self.records[name]
        identity = {"granularity": self.granularity, "reduction": self.reduction,
                    "parameters": record.values(self.values, self.args), "code": dict(record.code)}
        if self.compute_batch is not None:
            identity["compute_batch"] = self.compute_batch
        if record.seeded:
            identity["seed"] = self.seed
            if record.keying is not None:
                identity["keying"] = record.keying
        return json.loads(canonical_json(identity))

    def ranks_checkpoint(self, name: str, checkpoint_sha256: str | None) -> str | None:
        """The base checkpoint hash that method `name`'s ranks record: None where they ignore the model."""
        return checkpoint_sha256 if self.records[name].uses_model else None

    def ranks_change(self, name: str, manifest: dict | None, checkpoint_sha256: str | None) -> str | None:
        """What differs between the ranks a store records (its manifest) and those of method `name` made now
        from the base checkpoint `checkpoint_sha256`, in one line ("ig_steps 2 -> 20"); None when nothing does
        (or there is no store)."""
        if manifest is None:
            return None
        changes = [f"{key} {_short(old)} -> {_short(new)}"
                   for key, old, new in _differences(manifest.get("params"), self.ranks_identity(name))]
        checkpoint = self.ranks_checkpoint(name, checkpoint_sha256)
        if checkpoint is not None and manifest.get("checkpoint_sha256") != checkpoint:
            changes.append(f"base checkpoint {_short(manifest.get('checkpoint_sha256'))} -> {_short(checkpoint)}")
        return "; ".join(changes) or None

    def check_ground_truth(self, dataset_name: str, ground_truth: bool) -> None:
        """Refuses (UserError) the methods that read ground-truth masks (oracle) when the dataset has none: before
        any stage, so that a sweep says so before it trains a base model."""
        masked = [repr(name) for name, record in self.records.items() if record.ground_truth]
        if masked and not ground_truth:
            raise UserError(f"dataset {dataset_name} has no ground-truth masks, so it has no {', '.join(masked)} "
                            f"method; leave it out of --method")

    def method_params(self, ds, device, amp: str):
        """The MethodParams the estimators compute with on dataset `ds` (the black IG baseline is its mean and
        std's) and `device`, under --amp `amp`."""
        values = dict(self.values)
        baseline = values.pop("ig_baseline")
        return MethodParams(**values, autocast_dtype=autocast_dtype(amp, device), seed=self.seed,
                            ig_baseline=black_baseline(ds.mean, ds.std) if baseline == "black" else tuple(baseline),
                            args={k: v for k, v in self.args.items() if k not in PARAMETERS})


def _differences(recorded, requested, path: str = ""):
    """(name, recorded, requested) of every value that differs, nested mappings walked (the estimator's
    parameters named alone: "ig_steps", not "parameters.ig_steps")."""
    if isinstance(recorded, dict) and isinstance(requested, dict):
        for key in sorted(set(recorded) | set(requested), key=str):
            name = key if path in ("", "parameters") else f"{path}.{key}"
            yield from _differences(recorded.get(key), requested.get(key), name)
    elif recorded != requested:
        yield path, recorded, requested


def _short(value) -> str:
    text = "none" if value is None else json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."
