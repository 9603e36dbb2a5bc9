"""A run directory copied from anyone (issue 49): nothing a record names reaches outside it. A sealed prune intent
naming an absolute path, a `..` or a place behind a link, a re-sealed configuration record naming a method by a
path, a manifest whose method is not its folder's: every command that opens the directory leaves an outside folder
as it was and says what is wrong in one line (`ls` lists it and goes on); an intent that cannot be finished is said
once and never tried again."""

import errno
import json
import shutil

import pytest
from click.testing import CliRunner

from roarfast.cli import main
from roarfast.common.atomic import write_record
from roarfast.errors import UserError
from roarfast.records.head import FORMAT, Head
from roarfast.records.ranks import MANIFEST, RankStoreRecord
from roarfast.rundir import pruning
from roarfast.rundir.directory import RunDir
from tests.test_cli_errors import cli_ok, fails_with_one_line
from tests.test_prune import SWEEP, snapshot

#: a command that writes, run with a tiny grid: it must stop at the hostile record, before any training
TRAIN = ["--device", "cpu", "--no-progress", "--epochs", "1", "--data-option", "num_train=24", "--data-option",
         "num_test=16"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("contain") / "run"
    cli_ok(*SWEEP, "--run-dir", str(run_dir))
    return run_dir


@pytest.fixture
def run(swept, tmp_path):
    shutil.copytree(swept, tmp_path / "run")
    return RunDir(tmp_path / "run")


@pytest.fixture
def outside(run):
    """A folder beside the run directory holding a folder named as the run's rank store (what a hostile record
    would have a prune remove), and a file in it."""
    ((_, rid, _),) = run.rank_stores()
    folder = run.root.parent / "outside"
    (folder / rid).mkdir(parents=True)
    (folder / rid / "keep.txt").write_text("mine")
    return folder


def the_store(run) -> tuple:
    ((method, rid, path),) = run.rank_stores()
    return method, rid, path


def seal_intent(run, **fields) -> None:
    """A prune's intent as a hostile copy ships it: sealed (its digest checks), naming what `fields` say."""
    plan = {**pruning.intent([], [], [], [], [], False), **fields}
    run.claims_dir.mkdir(exist_ok=True)
    write_record(run.prune_intent_path, {**plan, "format": FORMAT})


def attack(run, outside, how: str) -> None:
    """Plants the hostile intent `how`."""
    _, rid, store = the_store(run)
    if how == "absolute":
        seal_intent(run, ranks=[[str(outside), rid]])
    elif how == "relative":
        seal_intent(run, ranks=[["../../outside", rid]])
    elif how == "dotdot":
        seal_intent(run, ranks=[["..", rid]])
    elif how == "damaged-record":
        seal_intent(run, damaged=["../../outside/keep.json"])
    elif how == "method-link":  # ranks/evil leads outside, where a folder of the store's id waits
        (run.ranks_root / "evil").symlink_to(outside)
        seal_intent(run, ranks=[["evil", rid]])
    elif how == "trash-link":  # an honest intent, but the trash it renames into leads outside
        run.claims_dir.mkdir(exist_ok=True)
        run.trash_dir.symlink_to(outside)
        seal_intent(run, ranks=[[store.parent.name, rid]])
    else:
        raise AssertionError(how)


ATTACKS = ["absolute", "relative", "dotdot", "damaged-record", "method-link", "trash-link"]


@pytest.mark.parametrize("how", ATTACKS)
def test_ls_lists_a_hostile_intent_once_and_touches_nothing_outside(run, outside, how):
    before, inside = snapshot(outside), snapshot(run.root / "ranks")
    attack(run, outside, how)
    out = cli_ok("ls", "--run-dir", str(run.root))
    said = [line for line in out.splitlines() if "prune.json" in line]
    assert len(said) == 1 and "cannot finish the prune" in said[0] and "no command tries it again" in said[0], out
    assert snapshot(outside) == before
    assert snapshot(run.root / "ranks") == inside or how == "method-link"  # the planted link stays, listed
    assert not run.prune_intent_path.exists()
    assert "prune.json" not in cli_ok("ls", "--run-dir", str(run.root))  # said once, never tried again


@pytest.mark.parametrize("how", ["absolute", "relative", "method-link", "trash-link"])
@pytest.mark.parametrize("command", [["prune", "--dry-run", "x"], ["prune", "x"], ["sweep", *SWEEP[1:]],
                                     ["train", *TRAIN]])
def test_every_command_that_opens_it_refuses_a_hostile_intent_in_one_line(run, outside, how, command):
    before = snapshot(outside)
    attack(run, outside, how)
    line = fails_with_one_line([*command, "--run-dir", str(run.root)])
    assert str(run.prune_intent_path) in line and "cannot finish the prune" in line
    assert "no command tries it again" in line and f"roarfast ls --run-dir {run.root}" in line
    assert snapshot(outside) == before and not run.prune_intent_path.exists()


@pytest.mark.parametrize("command", [["report"], ["compare"]])
def test_reading_commands_leave_a_hostile_intent_and_the_outside_alone(run, outside, tmp_path, command):
    before = snapshot(outside)
    attack(run, outside, "absolute")
    intent = run.prune_intent_path.read_bytes()
    if command == ["report"]:
        cli_ok("report", "--run-dir", str(run.root), "--out", str(tmp_path / "report"))
    else:
        cli_ok("compare", str(run.root), str(run.root))
    assert snapshot(outside) == before and run.prune_intent_path.read_bytes() == intent


def ends_in_one_error_line(args) -> str:
    """Runs the CLI; asserts exit code 1 and that its output (a sweep's progress first) ends in its one error line,
    no traceback; returns that line."""
    result = CliRunner().invoke(main, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and lines[-1].startswith("Error: "), result.output
    assert [line for line in lines if line.startswith("Error") or "Traceback" in line] == lines[-1:], result.output
    return lines[-1]


def hostile_configuration(run, outside) -> tuple:
    """The run's configuration record re-sealed naming its method by the outside folder's path, and a sealed
    manifest in ranks/evil/<id>/ saying the same; returns (the record's path, the store's id)."""
    method, rid, store = the_store(run)
    (path,) = run.configurations_root.glob("*.json")
    record = json.loads(path.read_text())
    record.pop("record_sha256")
    record["ranks"] = {str(outside): rid}
    for grid in record["grids"]:
        grid["methods"] = [str(outside)]
    write_record(path, record)
    shutil.copytree(store, run.ranks_root / "evil" / rid)
    for manifest in (run.ranks_root / "evil" / rid).glob(f"*/{MANIFEST}"):
        stored = json.loads(manifest.read_text())
        stored.pop("record_sha256", None)
        write_record(manifest, {**stored, "method": str(outside)})
    return path, rid


def test_a_configuration_naming_a_method_by_a_path_is_damaged_and_prune_removes_only_its_record(run, outside, tmp_path):
    before = snapshot(outside)
    path, rid = hostile_configuration(run, outside)
    out = cli_ok("ls", "--run-dir", str(run.root))
    (said,) = [line for line in out.splitlines() if path.name in line]
    assert said.startswith("! damaged configuration record") and "cannot name a place" in said
    assert f"its method '{str(outside)[:60]}" in said
    assert f"the ranks of {outside}" not in out
    line = fails_with_one_line(["prune", "--run-dir", str(run.root), "--dry-run", str(outside)])
    assert "no such configuration" in line
    dry = cli_ok("prune", "--run-dir", str(run.root), "--dry-run", path.name)
    assert f"would remove the damaged configuration record {path.name}" in dry and str(outside) not in dry
    for command in (["report", "--run-dir", str(run.root), "--out", str(tmp_path / "report")],
                    ["compare", str(run.root), str(run.root)], [*SWEEP, "--run-dir", str(run.root)]):
        line = ends_in_one_error_line(command)
        assert str(path) in line and "cannot name a place" in line and "restore it, or remove it" in line
    cli_ok("prune", "--run-dir", str(run.root), path.name)
    assert not path.exists() and snapshot(outside) == before
    assert (run.ranks_root / "evil" / rid).is_dir()  # a store of no configuration: listed, never followed
    assert not run.prune_intent_path.exists()


@pytest.mark.parametrize("method", ["random-too", "../random"])
def test_a_manifest_whose_method_is_not_its_folder_s_is_refused_in_one_line(run, method):
    _, rid, store = the_store(run)
    copy = run.ranks_root / "evil" / rid
    shutil.copytree(store, copy)
    manifest = next(copy.glob(f"*/{MANIFEST}"))
    stored = json.loads(manifest.read_text())
    stored.pop("record_sha256", None)
    write_record(manifest, {**stored, "method": method})
    with pytest.raises(UserError) as err:
        run.records.get(RankStoreRecord, at=manifest)
    assert str(manifest) in str(err.value) and "\n" not in str(err.value)
    # listed by its folder's name, never by the method its manifest claims
    assert ("evil", rid) in {(m, r) for m, r, _ in run.rank_stores()}
    assert method not in {m for m, _, _ in run.rank_stores()}
    assert "ranks of evil" in cli_ok("ls", "--run-dir", str(run.root))


def without_claims(root) -> dict:
    """snapshot(root) less claims/ (the prune's lock file is written there)."""
    return {path: size for path, size in snapshot(root).items() if not path.startswith("claims")}


def test_a_failure_before_anything_is_removed_withdraws_the_intent(run, monkeypatch):
    (path,) = run.configurations_root.glob("*.json")
    assert run.head().configuration == path.stem  # pruning it writes HEAD first
    before = without_claims(run.root)

    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(RunDir, "update_head", broken)
    line = fails_with_one_line(["prune", "--run-dir", str(run.root), path.stem[:8]])
    assert line.startswith("Error: prune: ") and "Input/output error" in line and "nothing was removed" in line
    assert not run.prune_intent_path.exists() and without_claims(run.root) == before
    monkeypatch.undo()
    assert "prune" not in cli_ok("ls", "--run-dir", str(run.root))  # nothing left for a later command


def test_a_failure_midway_is_said_once_with_what_to_do(run, monkeypatch, caplog):
    (path,) = run.configurations_root.glob("*.json")
    run.records.put(Head(dataset=run.head().dataset))  # its rank store and base model go with it

    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(pruning.os, "rename", broken)  # the record removed, then the first artifact fails
    line = fails_with_one_line(["prune", "--run-dir", str(run.root), path.stem[:8]])
    assert "cannot finish the prune recorded in" in line and "Input/output error" in line
    assert "no command tries it again" in line and f"`roarfast ls --run-dir {run.root}` lists what is left" in line
    monkeypatch.undo()
    assert not run.prune_intent_path.exists() and not path.exists()
    caplog.clear()
    out = cli_ok("ls", "--run-dir", str(run.root))  # what it left is listed, unused; no prune is tried again
    assert "prune" not in out + caplog.text and run.rank_stores() and run.models()


def test_head_naming_a_method_by_a_path_is_listed_as_damaged_and_refused_elsewhere(run, outside, tmp_path):
    before = snapshot(outside)
    head = json.loads(run.head_path.read_text())
    head.pop("record_sha256")
    ((_, rid),) = head["ranks"].items()
    write_record(run.head_path, {**head, "ranks": {str(outside): rid}})  # re-sealed: its digest checks
    out = cli_ok("ls", "--run-dir", str(run.root))
    (said,) = [line for line in out.splitlines() if line.startswith("! damaged, listed without it:")]
    assert str(run.head_path) in said and "cannot name a place" in said
    for command in (["prune", "--run-dir", str(run.root), "--dry-run", "x"],
                    ["report", "--run-dir", str(run.root), "--out", str(tmp_path / "report")],
                    [*SWEEP, "--run-dir", str(run.root)]):
        line = ends_in_one_error_line(command)
        assert str(run.head_path) in line and "cannot name a place" in line
    assert snapshot(outside) == before
