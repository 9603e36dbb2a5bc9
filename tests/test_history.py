"""A run directory that never forgets (issue 30): every artifact under the id of what made it, HEAD the latest
request, going back recomputes nothing, the report answers for the latest request, every cell knows its base
model, `roarfast ls` and `prune`; the ids and records as units."""

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.errors import UserError
from roarfast.rundir.configurations import configurations
from roarfast.records.head import Head
from roarfast.records.model import ModelRecord
from roarfast.records.ranks import RankStoreRecord
from roarfast.rundir.inventory import listing
from roarfast.report.load import ALL, load_run
from roarfast.results import RETRAIN, ResultsDB
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import cli_ok, fails_with_one_line

CPU = ["--device", "cpu", "--no-progress"]
#: the smallest sweep that shows it: random and ig, ROAR at one fraction, one seed, no control, one epoch
SWEEP = ["sweep", "--method", "ig", "--mode", "roar", "--fraction", "0.5", "--seeds", "1", "--no-control",
         "--epochs", "1", "--recipe", "epochs=1", *CPU]


def data(num_train: int) -> list:
    return ["--data-option", f"num_train={num_train}", "--data-option", "num_test=32"]


def sweep(run_dir, *args) -> str:
    return cli_ok(*SWEEP, "--run-dir", str(run_dir), *args)


def line(output: str, start: str) -> str:
    (found,) = [text for text in output.splitlines() if text.startswith(start)]
    return found


def retrain_rows(run_dir) -> list:
    with ResultsDB(RunDir(run_dir).results_path) as db:
        return db.rows(kind=RETRAIN, status="done")


def snapshot(root) -> dict:
    """path -> (size, mtime) of everything under `root`: what a reader must leave as it was."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


# -------------------------------------------------------------------------------------------- the trials

@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The issue's trial 2 on the embedded dataset: ig_steps 2, then 16, then 2 again; each sweep's output."""
    run_dir = tmp_path_factory.mktemp("history") / "run"
    outputs = [sweep(run_dir, *data(48), "--method-arg", f"ig_steps={steps}") for steps in (2, 16, 2)]
    return run_dir, outputs


def test_going_back_to_ig_steps_2_recomputes_nothing_and_the_report_shows_its_cells(swept):
    run_dir, (first, second, third) = swept
    run = RunDir(run_dir)
    assert line(second, "[sweep] base model: reusing fastnet")
    assert "extract: ig with other values than its latest ranks (ig_steps 2 -> 16): made beside them" in second
    assert line(second, "[sweep] done: 1, to do: 1")  # random's cell is shared, ig's is new
    assert line(third, "[sweep] base model: reusing fastnet") and line(third, "[sweep] ranks: reusing those of")
    assert line(third, "[sweep] done: 2, to do: 0")
    assert sorted(rid for method, rid, _ in run.rank_stores() if method == "ig") == sorted(
        {row["config"]["rank_id"] for row in retrain_rows(run_dir) if row["method"] == "ig"})  # both kept
    report = cli_ok("report", "--run-dir", str(run_dir))
    # the first configuration's label is what it is; the second's, what differs from the first (kept for good)
    assert line(report, "reported: the latest request's configuration [fastnet on embedded]")
    other = line(report, "also in this run directory: [ig steps 16] 2 cells: `roarfast report --run-dir")
    ig_2 = [r for r in retrain_rows(run_dir) if r["method"] == "ig"
            and r["config"]["ranks"]["parameters"]["ig_steps"] == 2]
    summary = json.loads((run.report_dir / "summary.json").read_text())
    (ig,) = [g for g in summary["groups"] if g["method"] == "ig"]
    assert ig["mean"] == ig_2[0]["test_acc"] and not summary.get("set_aside")  # nothing "older" set aside
    steps_16 = cli_ok("report", "--run-dir", str(run_dir), "--config", other.split("--config ")[1].rstrip("`"),
                      "--out", str(run_dir.parent / "report-16"))
    assert line(steps_16, "reported: configuration [ig steps 16]")


def test_another_subset_keeps_the_first_base_model_and_its_cells(swept, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(swept[0], run_dir)
    run = RunDir(run_dir)
    first_base = run.head().base
    weights = (run.model_dir(first_base) / "model.safetensors").read_bytes()
    dry = cli_ok(*SWEEP, "--run-dir", str(run_dir), *data(40), "--method-arg", "ig_steps=2", "--dry-run")
    assert "to train beside the 1 kept" in line(dry, "base model:")
    smaller = sweep(run_dir, *data(40), "--method-arg", "ig_steps=2")
    assert line(smaller, "[sweep] base model: training a new one beside the 1 kept")
    assert line(smaller, "[sweep] done: 0, to do: 2")
    assert len(run.models()) == 2 and run.head().base != first_base
    assert (run.model_dir(first_base) / "model.safetensors").read_bytes() == weights  # never replaced
    back = sweep(run_dir, *data(48), "--method-arg", "ig_steps=2")
    assert line(back, f"[sweep] base model: reusing fastnet {first_base[:8]}")
    assert line(back, "[sweep] ranks: reusing those of") and line(back, "[sweep] done: 2, to do: 0")
    listed = cli_ok("ls", "--run-dir", str(run_dir))
    assert len([text for text in listed.splitlines()[1:] if "cells 2/2" in text]) == 3
    # each configuration is reported with its own data (its example images, its chance), the subset's included
    parts = load_run(run, select=ALL).parts
    assert {p.context.dataset.fingerprint for p in parts} == {p.configuration.settings["config"]["dataset"]
                                                              for p in parts} and len(parts) == 3
    assert len({p.context.dataset.fingerprint for p in parts}) == 2
    assert line(listed, "*").split()[2:5] == ["[fastnet", "on", "embedded]"]  # HEAD's: the latest request
    # sizes: what each uses, and its own (what pruning it frees): the 48-image ones share their base model
    sized = {c["label"]: (c["bytes"], c["own_bytes"]) for c in listing(run_dir)["configurations"]}
    (small,) = [size for label, size in sized.items() if "num train 40" in label]
    assert small[0] == small[1] > 0
    assert all(own < total for label, (total, own) in sized.items() if "num train 40" not in label)
    # prune the smaller subset's: a dry run first, then its record, cells, ranks and base model go, nothing else
    label = [text for text in listed.splitlines() if "num train 40" in text][0].split()[0]
    before = snapshot(run_dir)
    planned = cli_ok("prune", "--run-dir", str(run_dir), label, "--dry-run")
    assert snapshot(run_dir) == before and "would remove base model" in planned
    done = cli_ok("prune", "--run-dir", str(run_dir), label)
    assert done.replace("removed", "would remove") == planned.replace(" (--dry-run: nothing was removed)", "")
    assert list(run.models()) == [first_base] and len(configurations(run)) == 2
    assert {r["config"]["base"] for r in retrain_rows(run_dir)} == {first_base}
    assert line(sweep(run_dir, *data(48), "--method-arg", "ig_steps=16"), "[sweep] done: 2, to do: 0")
    assert fails_with_one_line(["prune", "--run-dir", str(run_dir), "nothing-such"]).startswith(
        "Error: prune nothing-such: no such configuration in this run directory; its configurations: ")
    assert fails_with_one_line(["prune", "--run-dir", str(run_dir)]).startswith("Error: prune: name the config")


def test_a_configuration_keeps_its_label_and_goes_by_the_name_given_to_it(swept, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(swept[0], run_dir)
    named = sweep(run_dir, *data(48), "--method-arg", "ig_steps=16", "--name", "sixteen")
    assert line(named, "[sweep] done: 2, to do: 0")  # the same configuration, named: nothing trained again
    for text in ("sixteen", "ig steps 16"):  # its name, and the label it was shown with before
        assert load_run(RunDir(run_dir), select=text).answered.startswith("configuration [sixteen]")
    # refused where the configuration is recorded: its base model and ranks are reused, no cell is trained
    refused = CliRunner().invoke(main, [*SWEEP, "--run-dir", str(run_dir), *data(48), "--method-arg", "ig_steps=2",
                                        "--name", "sixteen"])
    assert refused.exit_code == 1 and refused.output.strip().splitlines()[-1] == (
        "Error: --name sixteen: another configuration of this run directory goes by that name; `roarfast ls` lists "
        "them") and "[sweep] done:" not in refused.output
    assert fails_with_one_line(["sweep", "--run-dir", str(run_dir), "--name", "all"], exit_code=2).startswith(
        "Error: Invalid value for '--name': reads as every configuration")
    listed = cli_ok("ls", "--run-dir", str(run_dir), "--long").splitlines()
    table = listed[listed.index("what differs:") + 1:]
    assert table[0].split() == ["id", "configuration", "ig", "steps"]
    assert {tuple(row.split()[1:]) for row in table[1:]} == {("fastnet", "on", "embedded", "2"), ("sixteen", "16")}
    assert not any("more" in text for text in listed)


def test_a_new_base_model_never_counts_an_old_cell_as_done(swept, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(swept[0], run_dir)
    before = retrain_rows(run_dir)
    retrain = ["retrain", "--run-dir", str(run_dir), "--method", "random,ig", "--epochs", "1", "--fraction", "0.5",
               "--recipe", "epochs=1", *CPU]
    evaluate = ["evaluate", "--run-dir", str(run_dir), "--metric", "morf", "--fraction", "0.5", "--method", "ig", *CPU]
    cli_ok(*evaluate)  # MoRF of the first base model
    cli_ok("train", "--run-dir", str(run_dir), "--epochs", "1", "--seed", "1", *CPU)
    assert "extract --method ig" in fails_with_one_line(retrain)  # its ranks are the new base model's: not made yet
    cli_ok("extract", "--run-dir", str(run_dir), "--method", "ig", "--method-arg", "ig_steps=2", *CPU)
    cli_ok(*retrain)
    rows = retrain_rows(run_dir)
    assert len(rows) == len(before) + 2  # random and ig trained again for the new base model
    base = RunDir(run_dir).head().base
    assert sorted(r["method"] for r in rows if r["config"]["base"] == base) == ["ig", "random"]
    cli_ok(*retrain)  # the same request again: its cells are done
    assert len(retrain_rows(run_dir)) == len(rows)
    # each configuration's report shows the no-retrain rows of its own base model only
    cli_ok(*evaluate)  # MoRF of the new one
    run = RunDir(run_dir)
    checkpoint = {c.configuration.settings["config"]["base"]: c.no_retrain for c in load_run(run, select=ALL).parts}
    assert base in checkpoint and len(checkpoint) >= 2
    for model, evaluated in checkpoint.items():
        # ig's row and random's, the baseline evaluate adds: all of this base model
        assert sorted(r["method"] for r in evaluated) == ["ig", "random"]
        assert {r["config"]["base"] for r in evaluated} == {run.base_checkpoint_sha256(model)}


# ---------------------------------------------------------------------------------------- format 1

def as_format_1(run_dir) -> None:
    """Rewrites a run directory of one base model into the layout f78a511 wrote: checkpoints/base,
    attributions/<method>/<split>, dataset.json, rows whose config names neither base model nor ranks' id."""
    from roarfast.common.atomic import write_record
    from roarfast.results import MeasurementKey

    run = RunDir(run_dir)
    head = run.head()
    run.legacy_base_checkpoint.parent.mkdir()
    os.rename(run.model_dir(head.base), run.legacy_base_checkpoint)  # a rename keeps meta.json's time
    for method, rid in head.ranks.items():
        os.renames(run.rank_dir(method, rid), run.legacy_rank_root / method)
    write_record(run.legacy_dataset_path, {**head.dataset, "format": 2})
    fields = ("kind", "dataset", "model", "method", "mode", "fill", "fraction", "seed")
    with ResultsDB(run.results_path) as db:
        db.rekey([(MeasurementKey(**{k: r[k] for k in fields}, config_hash=r["config_hash"]),
                   MeasurementKey.of(**{k: r[k] for k in fields},
                                     config={k: v for k, v in r["config"].items() if k not in ("base", "rank_id")}))
                  for r in db.rows(kind=RETRAIN)])
    for place in (run.head_path, run.configurations_root, run.datasets_root, run.models_root, run.ranks_root):
        if place.is_dir():
            shutil.rmtree(place)
        elif place.exists():
            place.unlink()


@pytest.fixture(scope="module")
def format_1_made(tmp_path_factory):
    """A run directory of format 1: a base model, random's ranks and its one cell."""
    run_dir = tmp_path_factory.mktemp("format-1") / "old"
    cli_ok(*SWEEP, "--run-dir", str(run_dir), *data(40), "--method", "random")
    as_format_1(run_dir)
    return run_dir


@pytest.fixture
def format_1(format_1_made, tmp_path):
    run_dir = tmp_path / "old"
    shutil.copytree(format_1_made, run_dir)
    return run_dir


def test_a_format_1_run_directory_is_read_as_it_is(format_1):
    before = snapshot(format_1)
    assert "cells 1, " in cli_ok("ls", "--run-dir", str(format_1))
    assert cli_ok("report", "--run-dir", str(format_1), "--out", str(format_1.parent / "report"))
    dry = cli_ok(*SWEEP, "--run-dir", str(format_1), *data(40), "--method", "random", "--dry-run")
    assert "reused" in line(dry, "base model:") and line(dry, "progress: done: 1, to do: 0")
    assert snapshot(format_1) == before  # nothing written, nothing migrated


def test_the_first_command_that_writes_migrates_it_and_reuses_what_it_holds(format_1):
    run = RunDir(format_1)
    meta = json.loads((run.legacy_base_checkpoint / "meta.json").read_text())
    again = cli_ok(*SWEEP, "--run-dir", str(format_1), *data(40), "--method", "random")
    assert line(again, "[sweep] base model: reusing") and line(again, "[sweep] done: 1, to do: 0")
    assert not run.legacy_base_checkpoint.exists() and not run.legacy_rank_root.exists()
    assert not run.legacy_dataset_path.exists() and run.head().base == ModelRecord.from_record(meta).id
    (row,) = retrain_rows(format_1)
    assert row["config"]["base"] == run.head().base and row["config"]["rank_id"] == run.head().ranks["random"]
    (record,) = configurations(run)
    assert run.head().configuration == record["id"]


def test_rows_not_proven_to_come_from_the_migrated_base_model_stay_apart(format_1):
    import sqlite3

    from roarfast.measurements.schema import row_digest

    run = RunDir(format_1)
    with sqlite3.connect(run.results_path) as raw:  # a cell that finished before the base model was saved
        raw.row_factory = sqlite3.Row
        (row,) = raw.execute("SELECT rowid, * FROM measurements WHERE kind = 'retrain'").fetchall()
        raw.execute("UPDATE measurements SET finished = '2000-01-01T00:00:00+00:00' WHERE rowid = ?", (row["rowid"],))
        fresh = raw.execute("SELECT * FROM measurements WHERE rowid = ?", (row["rowid"],)).fetchone()
        raw.execute("UPDATE measurements SET row_sha256 = ? WHERE rowid = ?", (row_digest(dict(fresh)), row["rowid"]))
    again = cli_ok(*SWEEP, "--run-dir", str(format_1), *data(40), "--method", "random")
    assert line(again, "[sweep] done: 0, to do: 1")
    listed = cli_ok("ls", "--run-dir", str(format_1))
    assert "made before base models were recorded" in listed and "made before run-directory format 2" in listed


def test_a_migration_killed_midway_is_finished_by_the_next_command_that_writes(format_1, monkeypatch):
    from roarfast.rundir import legacy, migrate

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(migrate, "_attribute_rows", killed)
    run = RunDir(format_1)
    with pytest.raises(KeyboardInterrupt):
        migrate.upgrade(run)
    assert run.models() and not run.legacy_base_checkpoint.exists()  # moved before the kill
    assert cli_ok("report", "--run-dir", str(format_1))  # a reader reads the half-migrated one as its plan says
    monkeypatch.undo()
    again = cli_ok(*SWEEP, "--run-dir", str(format_1), *data(40), "--method", "random")
    assert line(again, "[sweep] done: 1, to do: 0") and not legacy.plan_path(run).exists()


# --------------------------------------------------------------------------------------------- units

def test_a_base_model_s_id_is_what_its_meta_gives_and_a_renamed_one_is_refused(swept, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(swept[0], run_dir)
    run = RunDir(run_dir)
    base = run.head().base
    assert ModelRecord.from_record(run.model_meta(base)).id == base
    run.model_dir(base).rename(run.model_dir("0" * 16))
    run.records.put(Head(**{**run.head().to_dict(), "base": "0" * 16}))
    with pytest.raises(UserError, match="does not describe the base model 0000000000000000"):
        run.base_meta()


def test_a_rank_store_s_id_is_its_manifest_s_and_a_moved_one_is_refused(swept, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(swept[0], run_dir)
    run = RunDir(run_dir)
    rid = run.head().ranks["ig"]
    manifest = run.rank_store.manifest("ig", "test")
    assert RankStoreRecord.from_record(manifest).id == rid == RankStoreRecord(
        "ig", manifest["params"], manifest["checkpoint_sha256"], manifest["dataset_fingerprint"]).id
    other = [i for method, i, _ in run.rank_stores() if method == "ig" and i != rid][0]
    shutil.rmtree(run.rank_dir("ig", other))
    run.rank_dir("ig", rid).rename(run.rank_dir("ig", other))
    with pytest.raises(UserError, match=f"does not hold the ranks {other} its place names"):
        run.read_ranks("ig", "test", manifest["dataset_fingerprint"], rank_id=other)


def test_head_is_sealed_and_a_link_at_its_place_is_refused(tmp_path):
    run = RunDir(tmp_path)
    assert run.head() == Head()
    run.records.put(Head(base="a" * 16, ranks={"grad": "b" * 16}, configuration="c" * 16))
    assert run.head().ranks == {"grad": "b" * 16}
    run.head_path.write_text(run.head_path.read_text().replace("b" * 16, "d" * 16))
    with pytest.raises(UserError, match="HEAD.json does not match the sha256 recorded in it"):
        run.head()
    run.head_path.unlink()
    run.head_path.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(UserError, match="HEAD.json: it is a symbolic link"):
        run.head()


def test_ls_and_report_refuse_bad_input_in_one_line(tmp_path, swept):
    assert fails_with_one_line(["ls", "--run-dir", str(tmp_path / "none")]) == (
        f"Error: --run-dir {tmp_path / 'none'}: no such run directory")
    assert fails_with_one_line(["report", "--run-dir", str(swept[0]), "--config", "zz"]).startswith(
        "Error: --config zz: no such configuration in this run directory; its configurations: ")


def test_a_study_given_no_dataset_takes_the_latest_request_s_and_lists_the_configurations(swept, tmp_path, capsys):
    from roarfast import Study

    run_dir = swept[0]
    study = Study(run_dir, methods=["ig"], device="cpu")
    assert study.dataset.fingerprint == RunDir(run_dir).head().dataset["fingerprint"]
    assert f"Study: dataset embedded (the run directory's latest, as {run_dir / 'HEAD.json'} records it)" in (
        capsys.readouterr().out)
    listed = study.configurations()
    assert list(listed["head"]) == [True, False] and list(listed["cells_done"]) == [2, 2]
    fresh = Study(tmp_path / "new", methods=["ig"], device="cpu", dataset_options={"num_train": 40})
    assert "Study: dataset embedded (embedded: the run directory records none)" in capsys.readouterr().out
    assert fresh.dataset.name == "embedded" and len(fresh.dataset.train) == 40
