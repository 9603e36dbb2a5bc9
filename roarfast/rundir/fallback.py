"""The one line said where a stage loads the embedded dataset for want of another: no dataset was named and the
run directory records none (its HEAD names none), though it holds work (a base model, ranks, results) that some
data made. Loading the embedded dataset then ends, steps later, in a refusal ("... made from another dataset")
that does not say why; this line says it fell back and what to pass: the data the base model was trained on, as
its record in datasets/ describes it, where that record is kept."""

import logging

from roarfast.errors import UserError

log = logging.getLogger(__name__)

#: the run directories whose fallback was said: once a process each (a dry run asks for the dataset several times)
_said = set()


def say_embedded_fallback(run) -> None:
    """Says (once a process) that `run` (a RunDir holding work) records no dataset, so the embedded one is loaded."""
    if run.root in _said or not (run.models() or run.rank_stores() or run.results_path.exists()):
        return
    _said.add(run.root)
    log.warning("note: %s records no dataset (its HEAD names none) and no --dataset was given: loading the embedded "
                "dataset with its defaults; if its work was made from other data, pass %s", run.root,
                _what_to_pass(run))


def _what_to_pass(run) -> str:
    """The options that load the data `run`'s base models were trained on, from the first one whose dataset record
    is kept; else a description of them."""
    for model_id in run.models():
        fingerprint = run.model_meta(model_id).get("dataset_fingerprint")
        try:
            record = run.dataset_record(fingerprint) if fingerprint else None
        except UserError:  # a damaged record: no hint from it
            record = None
        if record is not None:
            words = [f"--dataset {record['name']}"]
            words += [f"--data-dir {record['data_dir']}"] if record["data_dir"] else []
            words += [f"--data-option {key}={value}" for key, value in sorted(record["options"].items())]
            return (f"`{' '.join(words)}` (the data of base model {model_id}, as "
                    f"{run.dataset_record_path(fingerprint)} records it)")
    return "--dataset NAME with --data-dir DIR and --data-option KEY=VALUE as the base model was trained"
