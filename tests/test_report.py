"""The report on a fabricated results.sqlite with known answers, its files and figures read back, the
example grid on a real (tiny) dataset and rank store, and bad input."""

import csv
import json
import sqlite3

import matplotlib.image as mpimg
import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.report import write_report
from roarfast.report.figures import PAGE
from roarfast.report.load import load_run
from roarfast.report.sections import accuracy, controls, ensembles, examples, rankings
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.measurements.schema import row_digest
from roarfast.rundir.directory import RunDir

FRACTIONS = (0.1, 0.5, 0.9)
RANDOM = {"roar": {0.1: [0.90, 0.91, 0.92], 0.5: [0.85, 0.86, 0.88], 0.9: [0.70, 0.72, 0.75]},
          "kar": {0.1: [0.30, 0.33, 0.35], 0.5: [0.60, 0.62, 0.63], 0.9: [0.85, 0.86, 0.88]}}
GOOD = {"roar": {0.1: [0.40, 0.42, 0.45], 0.5: [0.20, 0.22, 0.25], 0.9: [0.11, 0.12, 0.10]},
        "kar": {0.1: [0.80, 0.82, 0.83], 0.5: [0.90, 0.91, 0.93], 0.9: [0.92, 0.93, 0.94]}}
GOOD_CONTROL = [0.50, 0.55, 0.60]  # roar-mask at 0.5: far above chance (0.1)
RANDOM_CONTROL = [0.09, 0.11, 0.10]  # roar-mask at 0.5: at chance
HASH = "a" * 64


def key(method, mode, fraction, seed, fill="dataset-mean", config_hash=HASH):
    fill = None if mode.endswith("-mask") else fill
    return MeasurementKey(RETRAIN, "embedded", "fastnet", method, mode, fill, fraction, seed, config_hash)


def record(db, method, mode, fraction, seed, acc, fill="dataset-mean", config_hash=HASH):
    db.record(key(method, mode, fraction, seed, fill, config_hash),
              {"test_acc": acc, "val_acc": acc, "epochs": 2, "seconds": 1.5, "versions": {}})


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """random, `copy` (random's rows under another name), `good` (clearly better), `solo` (one seed),
    controls for good and random at ROAR 50%, plus a stale config, an unknown mode and a second fill."""
    run = tmp_path_factory.mktemp("run")
    RunDir(run).legacy_base_checkpoint.mkdir(parents=True)  # hand-made records of format 1, read as they are
    (RunDir(run).legacy_base_checkpoint / "meta.json").write_text(json.dumps(
        {"model": "fastnet", "dataset": "embedded", "num_classes": 10, "test_acc": 0.95, "val_acc": 0.96,
         "seconds": 12.0}))
    with ResultsDB(RunDir(run).results_path) as db:
        for mode in ("roar", "kar"):
            for f in FRACTIONS:
                for seed in range(3):
                    record(db, "random", mode, f, seed, RANDOM[mode][f][seed])
                    record(db, "copy", mode, f, seed, RANDOM[mode][f][seed], fill="dataset-mean")
                    record(db, "good", mode, f, seed, GOOD[mode][f][seed])
                record(db, "solo", mode, f, 0, GOOD[mode][f][0])
        for seed in range(3):
            record(db, "good", "roar-mask", 0.5, seed, GOOD_CONTROL[seed])
            record(db, "random", "roar-mask", 0.5, seed, RANDOM_CONTROL[seed])
            record(db, "good", "roar", 0.5, seed, 0.99, config_hash="b" * 64)  # stale: made older below
            record(db, "good", "roar", 0.5, seed, 0.5, fill="road", config_hash="c" * 64)
            record(db, "random", "roar", 0.5, seed, 0.5 + 0.01 * seed, fill="road", config_hash="c" * 64)
        db.mark_running(key("good", "kar", 0.7, 0))  # not done: not reported
    with sqlite3.connect(RunDir(run).results_path) as raw:
        raw.execute("UPDATE measurements SET finished = '2000-01-01T00:00:00+00:00' WHERE config_hash = ?", ("b" * 64,))
        # a mode from a later roarfast: copied from a done row
        columns = ("kind, dataset, model, method, {mode}, fill, fraction, seed, config_hash, status, test_acc, val_acc, "
                   "epochs, seconds, versions, extra, error, created, finished, owner, heartbeat, threads, config")
        raw.execute(f"INSERT INTO measurements ({columns.format(mode='mode')}) SELECT "
                    f"{columns.format(mode=repr('future-mode'))} FROM measurements "
                    "WHERE method = 'good' AND mode = 'roar' AND config_hash = ?", (HASH,))
        raw.row_factory = sqlite3.Row  # the rows edited by hand, sealed again as roarfast seals a row it writes
        for row in raw.execute("SELECT rowid, * FROM measurements").fetchall():
            raw.execute("UPDATE measurements SET row_sha256 = ? WHERE rowid = ?", (row_digest(dict(row)), row["rowid"]))
    return run


@pytest.fixture(scope="module")
def written(run_dir):
    return write_report(run_dir)


def verdict(summary, method, mode, fraction, fill="dataset-mean"):
    (entry,) = [e for e in summary["verdicts"] if (e["method"], e["mode"], e["fraction"], e["fill"])
                == (method, mode, fraction, fill)]
    return entry


def test_a_copy_of_random_is_no_different_and_a_clearly_lower_roar_curve_is_better(written):
    summary = written.summary
    for f in FRACTIONS:
        copy, good = verdict(summary, "copy", "roar", f), verdict(summary, "good", "roar", f)
        assert copy["p"] == pytest.approx(1.0) and copy["diff"] == 0.0
        # "no different" only where the equivalence test (TOST within 5 points, Holm over copy and good) says so
        p_tost = [max(sps.ttest_ind(np.add(RANDOM["roar"][f], 0.05), RANDOM["roar"][f], equal_var=False,
                                    alternative="greater").pvalue,
                      sps.ttest_ind(np.subtract(values, 0.05), RANDOM["roar"][f], equal_var=False,
                                    alternative="less").pvalue) for values in (RANDOM["roar"][f], GOOD["roar"][f])]
        equivalent = multipletests(p_tost, method="holm")[1][0] < 0.05
        assert copy["verdict"] == ("no different" if equivalent else "undecided")
        for mode in ("roar", "kar"):
            assert verdict(summary, "good", mode, f)["verdict"] == "better than random"
    assert verdict(summary, "copy", "roar", 0.1)["verdict"] == "no different"  # a spread of 1 point: +-1.7 at 90%
    assert all(verdict(summary, "copy", "kar", f)["detectable"] > 0 for f in FRACTIONS)
    # Holm over {good, copy} at ROAR 50%: good's p is the smaller of two, so it is doubled
    p_good = sps.ttest_ind(GOOD["roar"][0.5], RANDOM["roar"][0.5], equal_var=False).pvalue
    good = verdict(summary, "good", "roar", 0.5)
    assert good["p"] == pytest.approx(p_good) and good["p_holm"] == pytest.approx(2 * p_good)


def test_one_seed_draws_no_verdict(written):
    for mode in ("roar", "kar"):
        for f in FRACTIONS:
            entry = verdict(written.summary, "solo", mode, f)
            assert entry["verdict"] == "no verdict drawn (one seed)" and entry["p"] is None
    assert any(line.startswith("ROAR 50% [dataset-mean] solo: no verdict drawn") for line in written.verdict_lines())


def test_leaky_control_is_flagged_in_the_verdict_line_and_a_control_at_chance_is_not(written):
    leak = {(e["method"], e["mode"], e["fraction"]): e for e in written.summary["leakage"]}
    assert leak[("good", "roar-mask", 0.5)]["leaky"] is True
    assert leak[("good", "roar-mask", 0.5)]["p"] == pytest.approx(
        sps.ttest_1samp(GOOD_CONTROL, 0.1, alternative="greater").pvalue)
    assert leak[("random", "roar-mask", 0.5)]["leaky"] is False
    lines = written.verdict_lines()
    (good_line,) = [line for line in lines if line.startswith("ROAR 50% [dataset-mean] good:")]
    assert "LEAKY" in good_line and "55.0%" in good_line and "removal pattern's shape" in good_line
    (copy_line,) = [line for line in lines if line.startswith("ROAR 50% [dataset-mean] copy:")]
    assert "no control" in copy_line and "LEAKY" not in copy_line
    assert not any(line.startswith("ROAR 50% [dataset-mean] random") for line in lines)  # random's control is at chance


def test_ranking_by_auc_per_seed(written):
    (roar,) = [r for r in written.summary["rankings"] if r["mode"] == "roar" and r["fill"] == "dataset-mean"]
    order = [e["method"] for e in roar["entries"]]
    # solo is good's seed 0, the lowest of good's curves: lower is better in ROAR
    assert order[:2] == ["solo", "good"] and set(order[2:]) == {"random", "copy"}
    assert roar["fractions"] == list(FRACTIONS)
    # per seed: trapezoid area over 0.1..0.9 divided by 0.8; then the mean over seeds
    per_seed = [np.trapezoid([GOOD["roar"][f][s] for f in FRACTIONS], FRACTIONS) / 0.8 for s in range(3)]
    good = roar["entries"][1]
    assert good["mean"] == pytest.approx(np.mean(per_seed)) and good["n"] == 3
    assert good["high"] - good["mean"] == pytest.approx(sps.t.ppf(0.975, 2) * np.std(per_seed, ddof=1) / np.sqrt(3))
    assert roar["entries"][0]["n"] == 1 and roar["entries"][0]["low"] is None  # one seed: no interval
    (road,) = [r for r in written.summary["rankings"] if r["fill"] == "road"]
    assert road["fractions"] == [0.5] and road["incomplete"] == []
    (kar,) = [r for r in written.summary["rankings"] if r["mode"] == "kar"]
    assert [e["method"] for e in kar["entries"]][:2] == ["good", "solo"]  # higher is better
    # solo's one seed: the ranking is shown, never as a finding
    assert roar["not_a_finding"] == "one seed"
    assert any(line.startswith("[not a finding: one seed] ranking ROAR [dataset-mean]") for line in written.verdict_lines())


def test_newest_config_wins_fills_stay_apart_and_unknown_modes_are_ignored(written):
    summary = written.summary
    (group,) = [g for g in summary["groups"] if (g["method"], g["mode"], g["fraction"], g["fill"])
                == ("good", "roar", 0.5, "dataset-mean")]
    assert group["mean"] == pytest.approx(np.mean(GOOD["roar"][0.5]))  # not the stale 0.99
    assert summary["fills"] == ["dataset-mean", "road"]
    road = verdict(summary, "good", "roar", 0.5, fill="road")
    assert road["random_mean"] == pytest.approx(0.51)
    (stale,) = summary["set_aside"]  # rows before schema v5: the newest of each cell, the older set aside
    assert stale["rows"] == 3 and "another config hash" in stale["why"]
    lines = written.verdict_lines()
    assert lines[0].startswith("CONCLUSIVE: learning shown")
    assert any(line.startswith("set aside: 3 row(s): cells measured again under another config hash") for line in lines)
    assert any("future-mode" in n for n in summary["notes"])
    assert not any(g["mode"] == "future-mode" for g in summary["groups"])
    assert summary["chance"] == pytest.approx(0.1) and summary["base"]["test_acc"] == 0.95


def test_files_are_written_and_self_contained(written, run_dir):
    out = RunDir(run_dir).report_dir
    assert written.index_html == out / "index.html"
    for name in ("index.md", "index.html", "cells.csv", "summary.json", "accuracy_dataset-mean.png",
                 "accuracy_road.png", "controls.png"):
        assert (out / name).is_file(), name
    page = (out / "index.html").read_text()
    assert page.count("data:image/png;base64,") == len(written.summary["figures"]) >= 3
    assert "src='http" not in page and "Welch" in page and "Holm" in page
    assert json.loads((out / "summary.json").read_text())["verdicts"] == written.summary["verdicts"]
    with open(out / "cells.csv") as f:
        rows = list(csv.DictReader(f))
    # 2 modes x 3 fractions x (3 random + 3 copy + 3 good + 1 solo), 6 controls, 6 road cells
    assert len(rows) == 2 * 3 * 10 + 6 + 6
    (cell,) = [r for r in rows if (r["method"], r["mode"], r["fraction"], r["seed"], r["fill"])
               == ("good", "roar", "0.5", "1", "dataset-mean")]
    assert float(cell["test_acc"]) == GOOD["roar"][0.5][1] and float(cell["control_acc"]) == GOOD_CONTROL[1]
    assert "## Verdict against random, ROAR" in (out / "index.md").read_text()


def test_without_a_sweeps_record_the_stage_times_are_what_the_run_directory_holds(written):
    # no stages.json: the base model's meta and the sums of the reported cells' seconds (1.5 s each)
    assert written.summary["stages"] == [
        {"stage": "train", "seconds": 12.0, "source": "base checkpoint meta.json"},
        {"stage": "extract", "seconds": None, "source": "not recorded (the rank store keeps no timings)"},
        {"stage": "retrain (sum of cells)", "seconds": 66 * 1.5, "source": "results.sqlite"},
        {"stage": "controls (sum of cells)", "seconds": 6 * 1.5, "source": "results.sqlite"}]


def labelled_lines(ax) -> set:
    return {line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")}


def read_png(fig, path):
    fig.savefig(path, dpi=60)
    image = mpimg.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert image[..., :3].std() > 0.05  # not blank
    return image


def test_figures_draw_one_line_per_method(written, tmp_path):
    summary = written.summary
    fig = accuracy.figure_accuracy(summary, "dataset-mean", PAGE)
    roar, kar = fig.axes[:2]
    expected = {"random", "copy", "good", "solo", "chance", "base model (unmodified)"}
    assert labelled_lines(roar) == expected and labelled_lines(kar) == expected
    assert roar.get_xlabel() == "fraction of pixels removed (%)" and kar.get_xlabel() == "fraction of pixels kept (%)"
    image = read_png(fig, tmp_path / "a.png")
    assert image.shape[1] > image.shape[0]  # two panels side by side
    # across a paper's page where a fill has two panels (ROAR and KAR), in a column where it has one (road: ROAR)
    assert {f.fill: f.wide for f in accuracy.figures(summary, None, None)} == {"dataset-mean": True, "road": False}
    fig = controls.figure_controls(summary, PAGE)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["random, ROAR", "good, ROAR: LEAKY control"]
    assert labelled_lines(panels[1]) == {"ROAR (dataset-mean)", "ROAR (road)", "mask-only control", "chance",
                                         "base model (unmodified)"}
    read_png(fig, tmp_path / "c.png")
    assert ensembles.figure_ensembles(summary, "dataset-mean", PAGE) is None  # no grad family in these results


def test_ensemble_panels_per_base_estimator(tmp_path):
    groups = [{"method": m, "mode": "roar", "fill": "dataset-mean", "fraction": f, "mean": acc, "low": acc - 0.02,
               "high": acc + 0.02, "n": 3} for m, acc in (("grad", 0.6), ("sg-grad", 0.5), ("sg-sq-grad", 0.3),
                                                          ("var-grad", 0.35), ("ig", 0.7), ("random", 0.8))
              for f in FRACTIONS]
    summary = {"groups": groups, "chance": 0.1, "base": {"test_acc": 0.9}, "fills": ["dataset-mean"]}
    fig = ensembles.figure_ensembles(summary, "dataset-mean", PAGE)
    (panel,) = fig.axes  # ig has no ensemble member here: no panel
    assert labelled_lines(panel) == {"grad", "sg-grad", "sg-sq-grad", "var-grad", "random", "chance",
                                     "base model (unmodified)"}
    read_png(fig, tmp_path / "e.png")


def test_example_grid_masks_as_retraining_does(tmp_path):
    import torch

    from roarfast import ops
    from roarfast.data import load_dataset
    from roarfast.records.ranks import RankStoreRecord

    run = RunDir(tmp_path / "run")
    ds = load_dataset("embedded", None, num_train=40, num_test=20)
    ids = {method: RankStoreRecord(method, {}, None, ds.fingerprint).id for method in ("random", "oracle")}
    run.update_head("test", dataset=run.remember_dataset(ds), ranks=ids)
    h, w = ds.test.shape[1:]
    ranks = {}
    store = run.rank_store
    for i, method in enumerate(("random", "oracle")):
        ranks[method] = ops.rank(torch.rand(len(ds.test), h, w, generator=torch.Generator().manual_seed(i)))
        with store.open_writer(method, "test", shape=ranks[method].shape, dtype=ranks[method].dtype, chunk_size=20,
                               params={}, checkpoint_sha256=None, dataset_fingerprint=ds.fingerprint) as writer:
            writer.write_chunk(0, ranks[method])
    with ResultsDB(run.results_path) as db:
        for method in ranks:
            for mode in ("roar", "kar"):
                for f in (0.25, 0.5):
                    record(db, method, mode, f, 0, 0.5)
    written = write_report(run.root)
    assert (run.report_dir / "examples.png").is_file()
    images, methods, labels, fill = examples.example_grid(written.summary, load_run(run), run)
    assert fill == "dataset-mean" and methods == ["random", "oracle"]
    assert labels == ["original", "ROAR\n25%", "ROAR\n50%", "KAR\n25%", "KAR\n50%"]
    original = ds.test.images[examples.EXAMPLE_INDEX].permute(1, 2, 0).double().numpy() / 255
    mean = np.array(ds.mean)
    for r, method in enumerate(methods):
        rank = ranks[method][examples.EXAMPLE_INDEX].numpy()
        assert np.allclose(images[r, 0], original, atol=1e-6)
        for c, (keep, f) in enumerate(((False, 0.25), (False, 0.5), (True, 0.25), (True, 0.5)), start=1):
            top = rank < int(f * h * w)
            replaced = ~top if keep else top
            expected = np.where(replaced[..., None], mean, original)  # dataset-mean fill, back in pixels
            assert np.allclose(images[r, c], expected, atol=1e-5), (method, keep, f)


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="no results.sqlite"):
        write_report(empty)
    assert list(empty.iterdir()) == []
    result = CliRunner().invoke(main, ["report", "--run-dir", str(empty)])
    assert result.exit_code != 0 and "no results.sqlite" in result.output and "Traceback" not in result.output
    with ResultsDB(RunDir(empty).results_path) as db:
        db.mark_running(key("random", "roar", 0.5, 0))
    with pytest.raises(UserError, match="no finished cells"):
        write_report(empty, out_dir=tmp_path / "out")
    assert not RunDir(empty).report_dir.exists() and not (tmp_path / "out").exists()


def test_cli_prints_verdicts_and_where_the_report_is(run_dir, tmp_path):
    result = CliRunner().invoke(main, ["report", "--run-dir", str(run_dir), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "ROAR 50% [dataset-mean] good: better than random" in result.output
    assert result.output.strip().endswith(str(tmp_path / "r" / "index.html"))


def test_a_method_lacking_a_fraction_is_not_ranked_over_a_shorter_curve():
    accs = {("a", "roar", "dataset-mean", 0.1): {0: 0.5, 1: 0.6}, ("a", "roar", "dataset-mean", 0.5): {0: 0.4, 1: 0.3},
            ("b", "roar", "dataset-mean", 0.1): {0: 0.9, 1: 0.8}}
    (ranking,) = rankings.rankings(accs)
    assert ranking["fractions"] == [0.1, 0.5] and ranking["incomplete"] == ["b"]
    (entry,) = ranking["entries"]
    assert entry["method"] == "a" and entry["mean"] == pytest.approx(np.mean([0.45, 0.45]))
