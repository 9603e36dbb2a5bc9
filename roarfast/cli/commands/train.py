"""`roarfast train`: the base classifier, trained on the unmodified dataset or adopted from weights."""

from pathlib import Path

import click

from roarfast.cli.commands import command
from roarfast.cli.errors import built, friendly_errors
from roarfast.cli.options import amp_option, model_option, options_of, recipe_option, trust_option
from roarfast.common.run_options import RunOptions
from roarfast.data.options import DataOptions


@command()
@options_of(RunOptions, "run")
@options_of(DataOptions, "data")
@model_option("{models} (default: by dataset and device)")
@click.option("--epochs", type=int, default=None, help="training epochs (default: the model's recipe)")
@click.option("--batch-size", type=int, default=None, help="batch size (default: the model's recipe)")
@recipe_option
@amp_option
@click.option("--weights", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="adopt trained weights as the base model instead of training it: a state dict of --model for this "
                   "data, as safetensors or a torch.save file (loaded with weights_only=True); loaded strictly, "
                   "evaluated, recorded with its digest")
@trust_option
@friendly_errors
def train(run, data, model, epochs, batch_size, recipe, amp, weights):
    """Train the base classifier on the unmodified dataset (validation split held out for model selection), or
    adopt trained weights as the base model (--weights)."""
    # late: loads torch, and --help imports this module
    from roarfast.stages.basemodel import TrainOptions, run_train

    options = built(TrainOptions, model=model, epochs=epochs, batch_size=batch_size, amp=amp, recipe=recipe,
                    weights=weights)
    summary = run_train(run.run_dir, options, **data.stage_arguments(), **run.stage_arguments(), echo=click.echo)
    adopted = summary["adopted"]
    reused = f"reusing {summary['model']} ({summary['made']}): " if summary["reused"] else ""
    source = f"{summary['model']} adopted from {adopted['file']} (sha256 {adopted['file_sha256'][:12]}): " \
        if adopted and not summary["reused"] else ""
    click.echo(f"base model: {reused}{source}val {summary['val_acc']:.2%}, test {summary['test_acc']:.2%} "
               f"-> {summary['checkpoint']}")
