"""A study that cannot answer says so first (issue 37): cells or a base model at chance make the report
INCONCLUSIVE, with the reason and the fix, in its first lines, index.md and summary.json; its rankings and
verdicts are marked as not findings and its controls untestable, never "not leaky". The leak tests are
Holm-corrected over the controls read together. Hand-made results.sqlite files, read by the report."""

import json

import pytest
from scipy import stats as sps

from roarfast import stats
from roarfast.errors import UserError
from roarfast.report import write_report
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.directory import RunDir

HASH = "a" * 64
N_TEST = 2000


def hand_made_run(root, rows, base_acc: float, n_test: int = N_TEST, adopted: dict | None = None) -> RunDir:
    """A run directory whose base model (15 epochs, unless `adopted`) reached `base_acc` on 10 classes, and
    `rows` [(method, mode, fraction, [acc per seed])]: cells of 2 epochs, 3 s each, on `n_test` test images."""
    run = RunDir(root)
    run.legacy_base_checkpoint.mkdir(parents=True)  # hand-made records of run-directory format 1, read as they are
    meta = {"model": "fastnet", "dataset": "embedded", "num_classes": 10, "test_acc": base_acc, "val_acc": base_acc,
            "seconds": 60.0, "recipe": None if adopted else {"epochs": 15, "batch_size": 128, "lr": 0.05, "amp": None}}
    if adopted:
        meta["adopted"] = adopted
    (run.legacy_base_checkpoint / "meta.json").write_text(json.dumps(meta))
    with ResultsDB(run.results_path) as db:
        for method, mode, fraction, accs in rows:
            for seed, acc in enumerate(accs):
                fill = None if mode.endswith("-mask") else "dataset-mean"
                db.record(MeasurementKey(RETRAIN, "embedded", "fastnet", method, mode, fill, fraction, seed, HASH),
                          {"test_acc": acc, "val_acc": acc, "epochs": 2, "seconds": 3.0, "versions": {},
                           "test_images": n_test, "test_chance": 0.1})
    return run


# the issue's study: 2 epochs on 2,000 images, every cell at chance (random a hair above it)
AT_CHANCE = ([(m, "roar", f, [0.100, 0.100, 0.100]) for m in ("grad", "sg-sq-grad") for f in (0.1, 0.5)]
             + [("random", "roar", f, [0.100, 0.102, 0.101]) for f in (0.1, 0.5)]
             + [(m, "roar-mask", 0.5, [0.100, 0.100, 0.100]) for m in ("grad", "sg-sq-grad")])
LEARNED = [("random", "roar", 0.5, [0.60, 0.62, 0.64]), ("grad", "roar", 0.5, [0.30, 0.32, 0.34]),
           ("sg", "roar", 0.5, [0.20, 0.21, 0.22]), ("grad", "roar-mask", 0.5, [0.10, 0.10, 0.10])]


@pytest.fixture(scope="module")
def stuck(tmp_path_factory):
    return write_report(hand_made_run(tmp_path_factory.mktemp("run"), AT_CHANCE, base_acc=0.45).root)


def test_cells_at_chance_make_the_study_inconclusive_said_first_with_the_fix(stuck):
    summary = stuck.summary
    assert summary["status"] == "inconclusive" and len(summary["reasons"]) == 1
    assert summary["reasons"][0].startswith("random's least-modified cells (ROAR 10%) did not leave chance: 10.1% [")
    assert summary["learning"]["cells"]["state"] == "at chance" and summary["learning"]["base"]["state"] == "shown"
    lines = stuck.verdict_lines()
    assert lines[0] == f"INCONCLUSIVE: {summary['reasons'][0]}"
    # the fix: the base model's epochs, and the 24 cells' 72 s of training (controls included) scaled to them
    assert lines[1].startswith("fix: train the cells longer") and "epochs=15" in lines[1]
    assert "24 cells would take about 9m00s of training (the 1m12s they took, x7.5)" in lines[1]
    on_disk = json.loads((stuck.out_dir / "summary.json").read_text())
    assert on_disk["status"] == "inconclusive" and on_disk["reasons"] == summary["reasons"]
    index = (stuck.out_dir / "index.md").read_text()
    assert index.split("## ")[1].startswith("INCONCLUSIVE: whether the study can answer")
    assert f"- INCONCLUSIVE: {summary['reasons'][0]}" in index


def test_an_inconclusive_studys_rankings_and_verdicts_are_not_findings_and_its_controls_untestable(stuck):
    summary = stuck.summary
    ranked = [line for line in stuck.verdict_lines() if "ranking ROAR" in line]
    assert ranked and all(line.startswith("[not a finding] ranking ROAR") for line in ranked)
    verdicts = [line for line in stuck.verdict_lines() if " grad:" in line or " sg-sq-grad:" in line]
    assert len(verdicts) == 4 and all(line.startswith("[not a finding] ROAR") for line in verdicts)
    assert not any(", not leaky" in line for line in stuck.verdict_lines())
    (at_half,) = [line for line in verdicts if line.startswith("[not a finding] ROAR 50% grad:")]
    assert "; control 10.0% untestable (the cells did not leave chance);" in at_half
    assert all(e["leaky"] is None and e["test"].startswith("untestable") for e in summary["leakage"])
    assert summary["counts"]["controls"] == {"all": 2, "tested": 0, "leaky": 0, "untested": 0, "untestable": 2}
    index = (stuck.out_dir / "index.md").read_text()
    assert "## NOT A FINDING (the study is INCONCLUSIVE): Ranking, ROAR" in index
    assert "## NOT A FINDING (the study is INCONCLUSIVE): Verdict against random, ROAR" in index
    assert "| mask-only controls | 0 tested: 0 leaky, 0 not leaky; 2 untestable" in index


def test_a_base_model_at_chance_is_inconclusive_with_the_command_that_trains_the_same_model_longer(tmp_path):
    summary = write_report(hand_made_run(tmp_path / "a", LEARNED, base_acc=0.105).root).summary
    assert summary["status"] == "inconclusive"
    (reason,) = summary["reasons"]
    assert reason.startswith("the base model did not leave chance: 10.5% [")
    (fix,) = summary["fix"]
    # the model it was (not the default one) for 4 x its 15 epochs, on the same data
    assert f"`roarfast train --run-dir {tmp_path / 'a'} --model fastnet --epochs 60 --dataset embedded`" in fix
    (control,) = summary["leakage"]  # the cells learned: their control is tested
    assert control["leaky"] is False
    healthy = write_report(hand_made_run(tmp_path / "b", LEARNED, base_acc=0.9).root)
    assert healthy.summary["status"] == "conclusive" and healthy.summary["fix"] == []
    assert healthy.verdict_lines()[0].startswith("CONCLUSIVE: learning shown: the base model 90.0% [")
    assert not any("INCONCLUSIVE" in line or "not a finding" in line for line in healthy.verdict_lines())


def test_a_study_that_cannot_tell_is_underpowered_with_the_seeds_or_images_that_would_decide_it(tmp_path):
    # random's best cells at 20% +- a wide interval over 2 seeds: neither above 15% nor at or below it
    rows = [("random", "roar", 0.5, [0.12, 0.30]), ("grad", "roar", 0.5, [0.10, 0.12]),
            ("sg", "roar", 0.5, [0.11, 0.12])]
    written = write_report(hand_made_run(tmp_path / "run", rows, base_acc=0.9, n_test=1000).root)
    summary = written.summary
    assert summary["status"] == "underpowered"
    cells = summary["learning"]["cells"]
    assert cells["state"] == "cannot tell" and cells["low"] < 0.15 < cells["high"]
    (fix,) = summary["fix"]
    assert fix.startswith(f"to decide whether random's least-modified cells (ROAR 50%) left chance: "
                          f"{cells['needs']['seeds']} seeds at their observed spread")
    lines = written.verdict_lines()
    assert lines[0].startswith("UNDERPOWERED: whether random's least-modified cells (ROAR 50%) left chance cannot "
                               "be told")
    assert all(line.startswith("[not a finding]") for line in lines if " grad:" in line or "ranking ROAR" in line)


def test_the_issues_study_at_chance_with_two_seeds_on_500_images_is_never_conclusive(tmp_path):
    rows = [(m, "roar", f, accs) for m, accs in (("random", [0.100, 0.120]), ("grad", [0.084, 0.100]),
                                                 ("sg", [0.110, 0.090])) for f in (0.1, 0.5)]
    summary = write_report(hand_made_run(tmp_path / "run", rows, base_acc=0.10, n_test=500).root).summary
    assert summary["status"] == "inconclusive"  # the base model's upper end (12.8%) is at or below 15%
    assert summary["learning"]["base"]["state"] == "at chance"
    assert summary["learning"]["cells"]["state"] != "shown"


# the issue's controls: one seed each on 500 test images, one at 12.4% (binomial p = 0.046 against 10%) among 6
CONTROLS = {"a": 0.124, "b": 0.1, "c": 0.1, "d": 0.1, "e": 0.1, "random": 0.1}
LEARNING = ([(m, "roar", 0.5, [0.60, 0.61, 0.62]) for m in CONTROLS]
            + [(m, "roar-mask", 0.5, [acc]) for m, acc in CONTROLS.items()])


def test_leak_tests_are_holm_corrected_over_the_controls_read_together(tmp_path):
    written = write_report(hand_made_run(tmp_path / "run", LEARNING, base_acc=0.9, n_test=500).root)
    leak = {e["method"]: e for e in written.summary["leakage"]}
    p = sps.binomtest(62, 500, 0.1, alternative="greater").pvalue
    assert p < 0.05 and leak["a"]["p"] == pytest.approx(p)  # significant alone: LEAKY before the correction
    # the smallest of 6 p-values is multiplied by 6 (the others are ~0.5 each)
    assert leak["a"]["p_holm"] == pytest.approx(6 * p) and leak["a"]["leaky"] is False
    assert written.summary["counts"]["controls"]["leaky"] == 0
    (line,) = [line for line in written.verdict_lines() if line.startswith("ROAR 50% a:")]
    assert f"not leaky (Holm p={6 * p:.2g})" in line
    assert "Holm-corrected over every control of the configuration" in written.summary["tests"]["leakage"]


def test_adopted_weights_are_named_by_file_and_digest_and_their_accuracy_is_read_for_undertraining(tmp_path):
    adopted = {"file": "/models/published.pt", "file_sha256": "c" * 64, "weights_sha256": "d" * 64}
    rows = [("random", "roar", 0.5, [0.20, 0.21, 0.22]), ("grad", "roar", 0.5, [0.15, 0.16, 0.17])]
    written = write_report(hand_made_run(tmp_path / "run", rows, base_acc=0.45, adopted=adopted).root)
    summary = written.summary
    assert summary["base"]["adopted"] == adopted and summary["measured"]["base"]["adopted"] == adopted
    index = (written.out_dir / "index.md").read_text()
    assert (f"| base model | fastnet, adopted weights /models/published.pt (sha256 {'c' * 64}), not trained here: "
            f"test 45.0%, validation 45.0% |") in index
    assert "epochs" not in index.split("| base model |")[1].split("\n")[0]  # no recipe invented
    # random's cells (21%) stay below half-way from chance (10%) to the adopted model (45%)
    (undertrained,) = [w for w in summary["warnings"] if w.startswith("mostly undertraining")]
    assert undertrained.startswith("mostly undertraining: the cells train 2 epochs, the base model's weights were "
                                   "adopted (trained elsewhere); even random's least-modified cells (ROAR 50%: 21.0%)")


def test_what_was_measured_names_the_estimators_parameters_versions_and_threads(tmp_path):
    run = hand_made_run(tmp_path / "run", [], base_acc=0.9)
    versions = {"python": "3.11.7", "roarfast": "0.1.0", "torch": "2.14.1", "numpy": "2.4.6", "cuda": None}
    params = {"random": {}, "sg-sq-grad": {"noise_level": 0.15, "n_samples": 15}}
    with ResultsDB(run.results_path) as db:
        for method, parameters in params.items():
            for seed, acc in enumerate((0.5, 0.52)):
                ranks = {"granularity": "pixel", "reduction": "sum_sq", "parameters": parameters, "seed": 7}
                key = MeasurementKey.of(kind=RETRAIN, dataset="embedded", model="fastnet", method=method, mode="roar",
                                        fill="dataset-mean", fraction=0.5, seed=seed,
                                        config={"recipe": {"epochs": 2}, "ranks": ranks, "dataset": "f" * 64,
                                                "fill": "dataset-mean"})
                db.record(key, {"test_acc": acc, "val_acc": acc, "epochs": 2, "seconds": 1.0, "versions": versions,
                                "threads": 2, "test_images": 500, "test_chance": 0.1})
    written = write_report(run.root)
    measured = written.summary["measured"]
    assert measured["estimators"] == {"random": {"seed": 7}, "sg-sq-grad": {"noise_level": 0.15, "n_samples": 15,
                                                                            "seed": 7}}
    assert measured["versions"] == [{"versions": versions, "cells": 4}] and measured["threads"] == [2]
    index = (written.out_dir / "index.md").read_text()
    assert ("| estimators (their parameters) | random seed=7; sg-sq-grad n_samples=15, noise_level=0.15, seed=7 |"
            in index)
    assert "| versions | numpy 2.4.6, python 3.11.7, roarfast 0.1.0, torch 2.14.1 |" in index
    assert "| CPU threads per cell | 2 |" in index


def test_the_report_reads_the_margin_and_design_its_requests_recorded_and_a_given_margin_wins(tmp_path):
    from types import SimpleNamespace

    from roarfast.report.analysis import design_of

    grids = [{"margin": 0.02}, {"margin": 0.03, "design": {"looks": [3, 5], "alpha": 0.05, "detect": 0.05,
                                                           "max_seeds": 5}}]
    design, recorded = design_of(SimpleNamespace(record={"grids": grids}))
    assert design.looks == (3, 5) and recorded == {"margin": 0.03, "detect": 0.05, "max_seeds": 5}
    assert design_of(SimpleNamespace(record={"grids": grids[:1]})) == (None, {"margin": 0.02})
    run = hand_made_run(tmp_path / "run", LEARNED, base_acc=0.9)
    assert write_report(run.root).summary["margin"] == stats.MARGIN  # nothing recorded: the default
    wide = write_report(run.root, margin=60).summary  # points: random's 62% no longer above chance + 60
    assert wide["margin"] == 0.6 and wide["status"] == "inconclusive"
    with pytest.raises(UserError, match="--margin should be a number of accuracy points between 0 and 100"):
        write_report(run.root, margin=0)


def test_adopted_weights_fixes_never_suggest_what_train_refuses_beside_weights(tmp_path):
    from roarfast.report.load import Context
    from roarfast.report.status import study_status

    adopted = {"file": "/models/published.pt", "file_sha256": "c" * 64, "weights_sha256": "d" * 64}
    meta = {"model": "fastnet", "dataset": "embedded", "dataset_options": {"num_test": 100}, "adopted": adopted}
    command = "roarfast sweep --run-dir /r --method grad --data-option num_test=100"
    cells = [{"method": "random", "mode": "roar", "fill": "dataset-mean", "fraction": 0.5, "seed": s, "test_acc": a}
             for s, a in enumerate((0.60, 0.61, 0.62))]

    def fixes(base_acc):
        context = Context(meta=meta, chance=0.1, chance_source="", n_test=100, run_dir="/r")
        return study_status(cells, context, {"test_acc": base_acc, "adopted": adopted, "epochs": 0}, 2, 0.05,
                            command)
    # at chance: other weights, or a base model trained here; never --epochs beside --weights
    (fix,) = fixes(0.04)["fix"]
    assert "`roarfast train --run-dir /r --weights FILE --model fastnet`" in fix and "--epochs" not in fix
    # cannot tell on 100 test images: more of them, the weights adopted on that data first (the sweep's command on
    # other data alone would train a base model instead of taking the adopted one)
    status = fixes(0.2)
    (fix,) = status["fix"]
    images = status["learning"]["base"]["needs"]["images"]
    assert (f"(`roarfast train --run-dir /r --weights /models/published.pt --model fastnet --dataset embedded "
            f"--data-option num_test={images}` (the same weights adopted on that data), then `roarfast sweep --run-dir "
            f"/r --method grad --data-option num_test={images}`)") in fix, fix
    assert "--epochs" not in fix
