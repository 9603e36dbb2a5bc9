"""`roarfast prune` cannot half-finish nor reach outside its run directory (issue 40): ids checked against their
form and their file's name, the intent written before anything goes and finished after a kill, links refused
before anything is removed, a configuration a live process trains refused, the rows removed last; `ls` lists a
damaged record (which prune removes) and reads the run directory without torch."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from roarfast.common.atomic import write_record
from roarfast.errors import UserError
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir import pruning
from roarfast.records.claims import this_process
from roarfast.rundir.configurations import configurations
from roarfast.rundir.directory import RunDir
from roarfast.records.head import FORMAT, Head
from roarfast.rundir.inventory import listing, prune
from roarfast.rundir.migrate import upgrade
from tests.test_cli_errors import cli_ok, fails_with_one_line

#: the smallest real run: random alone, ROAR at one fraction, one seed, one epoch, 24 images
SWEEP = ["sweep", "--method", "random", "--mode", "roar", "--fraction", "0.5", "--seeds", "1", "--no-control",
         "--epochs", "1", "--recipe", "epochs=1", "--device", "cpu", "--no-progress", "--data-option",
         "num_train=24", "--data-option", "num_test=16"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("prune") / "run"
    cli_ok(*SWEEP, "--run-dir", str(run_dir))
    return run_dir


@pytest.fixture
def run(swept, tmp_path):
    """A copy of the swept run directory whose HEAD names only its dataset: pruning its one configuration
    removes its record, its row, its rank store and the base model."""
    shutil.copytree(swept, tmp_path / "run")
    run = RunDir(tmp_path / "run")
    run.records.put(Head(dataset=run.head().dataset))
    return run


def rows(run) -> list:
    with ResultsDB(run.results_path) as db:
        return db.rows(kind=RETRAIN)


def snapshot(root) -> dict:
    return {str(p.relative_to(root)): p.lstat().st_size for p in sorted(root.rglob("*"))}


def the_record(run):
    (path,) = run.configurations_root.glob("*.json")
    return path


def test_a_prune_removes_its_configuration_and_what_only_it_used(run):
    cid = the_record(run).stem
    out = cli_ok("prune", "--run-dir", str(run.root), cid[:6])
    assert "removed 1 rows" in out and "removed base model" in out
    assert rows(run) == [] and run.models() == {} and run.rank_stores() == [] and configurations(run) == []
    assert not run.prune_intent_path.exists() and not run.trash_dir.exists()


def test_an_id_edited_to_reach_outside_is_refused_and_nothing_outside_is_removed(run):
    path = the_record(run)
    victim = run.root.parent / "outside" / "victim.json"
    victim.parent.mkdir()
    victim.write_text("{}")
    record = json.loads(path.read_text())
    record.pop("record_sha256")
    write_record(path, {**record, "id": "../../outside/victim"})  # re-sealed: its digest checks
    assert fails_with_one_line(["prune", "--run-dir", str(run.root), "../../ou"]).startswith(
        "Error: prune ../../ou: no such configuration")
    listed = cli_ok("ls", "--run-dir", str(run.root))
    assert f"! damaged configuration record {path.name}" in listed and "is not an id" in listed
    # the damaged record is pruned by its file's name: that file alone goes
    out = cli_ok("prune", "--run-dir", str(run.root), path.name)
    assert f"removed the damaged configuration record {path.name}" in out
    assert victim.is_file() and not path.exists() and len(rows(run)) == 1
    # HEAD naming a base model by a path is never followed: `ls` lists it as damaged, prune refuses in one line
    write_record(run.head_path, {**Head(base="../../outside").to_dict(), "format": FORMAT})  # re-sealed by hand
    listed = cli_ok("ls", "--run-dir", str(run.root))
    assert "! damaged, listed without it: " in listed and "the id of its base model, '../../outside', is not an id" in listed
    assert "the id of its base model, '../../outside', is not an id" in fails_with_one_line(
        ["prune", "--run-dir", str(run.root), "--dry-run", "anything"])
    with pytest.raises(UserError, match="the dataset fingerprint '../../outside/victim' a record gives is not a"):
        run.dataset_record("../../outside/victim")


def test_a_record_renamed_to_another_id_is_damage(run):
    path = the_record(run)
    path.rename(path.with_name("0123456789abcdef.json"))
    assert "does not describe the configuration its name gives" in listing(run.root)["damaged"][0]["why"]


@pytest.mark.parametrize("kill_at", ["rename", "rows"])
def test_a_prune_killed_midway_is_finished_by_the_next_command(run, monkeypatch, caplog, kill_at):
    cid = the_record(run).stem

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    if kill_at == "rename":  # the first artifact renamed into the trash, then killed
        rename = os.rename
        monkeypatch.setattr(pruning.os, "rename", lambda *a: (rename(*a), killed()))
    else:  # every artifact removed, then killed before the rows
        monkeypatch.setattr(pruning, "open_results", killed)
    with pytest.raises(KeyboardInterrupt):
        prune(run.root, [cid])
    monkeypatch.undo()
    assert run.prune_intent_path.is_file() and len(rows(run)) == 1  # the rows go last
    # no base model half removed: it is there whole, or gone
    assert all((p / "model.safetensors").is_file() for p in run.models().values())
    cli_ok("ls", "--run-dir", str(run.root))
    assert "finished the prune that was interrupted" in caplog.text
    assert rows(run) == [] and run.models() == {} and run.rank_stores() == [] and configurations(run) == []
    assert not run.prune_intent_path.exists() and not run.trash_dir.exists()


def test_a_writing_command_finishes_an_interrupted_prune(run, monkeypatch):
    monkeypatch.setattr(pruning, "open_results", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        prune(run.root, [the_record(run).stem])
    monkeypatch.undo()
    upgrade(run)  # what every command that writes calls first
    assert rows(run) == [] and not run.prune_intent_path.exists()


@pytest.mark.parametrize("linked", ["model", "claims"])
def test_a_link_is_refused_before_anything_is_removed(run, tmp_path, linked):
    if linked == "model":
        (where,) = run.models().values()
    else:
        where = run.claims_dir
    elsewhere = tmp_path / "elsewhere"
    shutil.move(where, elsewhere)
    where.symlink_to(elsewhere)
    before, kept = snapshot(run.root), snapshot(elsewhere)
    line = fails_with_one_line(["prune", "--run-dir", str(run.root), the_record(run).stem])
    assert f"{where}: it is a symbolic link" in line
    assert snapshot(run.root) == before and snapshot(elsewhere) == kept and len(rows(run)) == 1


def test_a_configuration_a_live_process_trains_is_not_pruned(run):
    done = rows(run)[0]
    fields = {k: done[k] for k in ("kind", "dataset", "model", "method", "mode", "fill", "fraction")}
    key = MeasurementKey.of(**fields, seed=1, config=done["config"])  # another cell of the same configuration
    with ResultsDB(run.results_path) as db:
        assert db.claim(key, this_process())
    line = fails_with_one_line(["prune", "--run-dir", str(run.root), the_record(run).stem])
    assert f"claimed by pid {os.getpid()} on {this_process()['host']}" in line and "nothing was removed" in line
    assert len(rows(run)) == 2 and configurations(run)
    # once its process is gone, the claim is dead and the prune goes ahead
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = {**this_process(), "pid": int(gone.stdout), "start": "0"}
    with ResultsDB(run.results_path) as db:
        db.release(key)
        assert db.claim(key, dead)
    cli_ok("prune", "--run-dir", str(run.root), the_record(run).stem)
    assert rows(run) == []


def test_a_cell_claimed_after_an_interrupted_prune_began_is_left_to_its_claimant(run, monkeypatch):
    done = rows(run)[0]
    fields = {k: done[k] for k in ("kind", "dataset", "model", "method", "mode", "fill", "fraction")}
    key = MeasurementKey.of(**fields, seed=1, config=done["config"])
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with ResultsDB(run.results_path) as db:
        assert db.claim(key, {**this_process(), "pid": int(gone.stdout), "start": "0"})  # a dead claim: pruned
    monkeypatch.setattr(pruning, "open_results", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        prune(run.root, [the_record(run).stem])
    monkeypatch.undo()
    with ResultsDB(run.results_path) as db:
        assert db.claim(key, this_process())  # a sweep takes the cell over before the prune is finished
    upgrade(run)
    assert [(r["seed"], r["status"]) for r in rows(run)] == [(1, "running")]


def test_a_damaged_record_is_listed_and_the_rest_is_read(run):
    path = the_record(run)
    path.write_text("{not json")
    found = listing(run.root)
    assert [d["file"] for d in found["damaged"]] == [path.name] and "not valid JSON" in found["damaged"][0]["why"]
    assert len(found["models"]) == 1 and len(found["ranks"]) == 1  # its artifacts: used by nothing readable
    cli_ok("prune", "--run-dir", str(run.root), path.stem, "--dry-run")
    assert path.exists()
    cli_ok("prune", "--run-dir", str(run.root), path.stem)
    assert not path.exists() and listing(run.root)["damaged"] == []


def test_ls_and_a_dry_run_import_no_torch_nor_scipy(swept):
    """Reading records is light: neither torch nor the report's statistics (scipy) load for `ls` or a dry run."""
    cid = next((swept / "configurations").glob("*.json")).stem
    code = ("import sys\nfrom click.testing import CliRunner\nfrom roarfast.cli import main\n"
            f"for args in (['ls'], ['prune', '--dry-run', {cid!r}]):\n"
            f"    result = CliRunner().invoke(main, [*args, '--run-dir', {str(swept)!r}])\n"
            "    assert 'configurations' in result.output or 'would remove' in result.output, result.output\n"
            "print(sorted(m for m in ('torch', 'scipy') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[]"


def test_missing_weights_and_damaged_side_records_are_one_line(run):
    (model_dir,) = run.models().values()
    (model_dir / "model.safetensors").unlink()
    with pytest.raises(UserError, match="model.safetensors is missing beside meta.json"):
        run.base_checkpoint_sha256(model_dir.name)
    (run.root / "leakage.json").write_text("[{\"method\": 1}]")
    assert "leakage.json does not hold fill-leakage rows" in cli_ok("ls", "--run-dir", str(run.root))
    assert "leakage.json does not hold fill-leakage rows" in fails_with_one_line(
        ["prune", "--run-dir", str(run.root), "--dry-run", "anything"])
    (run.root / "leakage.json").unlink()
    run.stage_times_path.write_text("{damaged")
    assert run.stage_times() is None  # left out, said in a note: the report goes on without them
    run.record_stage_time("train", 1.5)
    assert run.stage_times() == {"train": 1.5}
