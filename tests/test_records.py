"""The run directory's record types, its one put and verifying get, and opening it for writing (issue 40): the ids
are those main made before the record types (literals computed there), a stored record is read back only when
it is the one its name gives, a run directory is upgraded once per process, and a reader writes nothing."""

import json
import os

import pytest

from roarfast.common.atomic import write_record
from roarfast.errors import UserError
from roarfast.rundir import migrate, writing
from roarfast.rundir.directory import RunDir
from roarfast.records.head import FORMAT
from roarfast.records.configuration import ConfigurationRecord
from roarfast.records.model import ModelRecord
from roarfast.records.ranks import RankStoreRecord
from roarfast.records.rows import CellRecord

FP, OTHER = "ab" * 32, "cd" * 32

# (record, the id main's rundir.ids helpers gave it: model_id, adopted_model_id, model_id_of, rank_id, configuration_id)
MADE_ON_MAIN = [
    (ModelRecord(FP, "fastnet-small", None, {"epochs": 3, "lr": 0.1}, 0), "67dc2fb417284624"),
    (ModelRecord(OTHER, "pkg.mod:net", "ef" * 32, {"epochs": 1}, 7), "aff62e9d104bd651"),
    (ModelRecord(FP, "resnet18", None, adopted=True, weights_sha256="12" * 32), "56d0ad393ab6b8f5"),
    (RankStoreRecord("grad", {}, None, FP), "fe1dd47e09451c53"),
    (RankStoreRecord("ig", {"parameters": {"ig_steps": 8}, "code": "1.0"}, "34" * 32, FP), "d824d088a39edbd5"),
    (ConfigurationRecord({"dataset": "embedded", "model": "fastnet-small", "config": {"fill": "mean"}},
                         {"random": "0123456789abcdef", "grad": "fedcba9876543210"}), "5bf8aedce75595b6"),
    (ConfigurationRecord({}, {}), "4aba95fcdf9e8d25"),
]


@pytest.mark.parametrize("record, made", MADE_ON_MAIN)
def test_each_record_type_gives_the_id_main_gave_and_reads_back_what_it_writes(record, made):
    assert record.id == made
    stored = {**record.to_record(), "val_acc": 0.5, "grids": []}  # a stored record says more than what made it
    assert type(record).from_record(stored) == record and type(record).from_record(stored).id == made


def test_an_adopted_meta_without_its_digest_keeps_main_s_id():
    # model_id_of read such a meta as adopted with no weights' digest: still an adopted model's id
    assert ModelRecord.from_record({"adopted": {"file": "x"}, "dataset_fingerprint": FP, "model": "m"}).id \
        == "3f73e85928038db7"


def test_a_cell_s_record_is_its_row_s_config_and_its_id_the_row_s_config_hash():
    fill = CellRecord({"epochs": 2}, FP, {"code": "1"}, "0123456789abcdef", "fedcba9876543210", "dataset-mean")
    control = CellRecord({"epochs": 2}, FP, {"code": "1"}, "0123456789abcdef", "fedcba9876543210",
                         model_source="ef" * 32)
    # the configs main's CellTrainer wrote into results.sqlite, and their config_hash there
    assert fill.to_record() == {"recipe": {"epochs": 2}, "dataset": FP, "ranks": {"code": "1"},
                                "base": "0123456789abcdef", "rank_id": "fedcba9876543210", "fill": "dataset-mean"}
    assert fill.id == "68e16e5c831f67fb3a05b1ddce41637ea6d0de3ecec1f7ff48b574f10198856d"
    assert "fill" not in control.to_record() and control.to_record()["model_source"] == "ef" * 32
    assert control.id == "3908b4a4fce41d55e31f80f43080cc308bd50dc693481a0a0660e8b1df5afdc0"
    assert CellRecord.from_record(fill.to_record()) == fill and CellRecord.from_record(control.to_record()) == control


def _configuration(run, record=ConfigurationRecord({"config": {"base": None}}, {"random": "0123456789abcdef"})):
    stored = {**record.to_record(), "grids": [], "first": "t", "last": "t"}
    run.records.put(record, stored)
    return record, stored


def test_put_writes_a_record_that_get_reads_back_verified(tmp_path):
    run = RunDir(tmp_path / "run")
    record, stored = _configuration(run)
    assert run.records.get("configuration", record.id) == stored
    assert run.records.get("configuration", "0123456789abcdef") is None
    with pytest.raises(ValueError, match="does not say what made"):  # what is written is what is read back
        run.records.put(record, {**stored, "ranks": {"random": "fedcba9876543210"}})


@pytest.mark.parametrize("damage, says", [
    ("renamed", "does not describe the configuration its name gives"),
    ("edited", "does not describe the configuration its name gives"),
    ("unsealed", "it was written with"),
])
def test_get_refuses_a_record_that_is_not_the_one_its_name_gives_in_one_line(tmp_path, damage, says):
    run = RunDir(tmp_path / "run")
    record, stored = _configuration(run)
    path = run.configuration_path(record.id)
    if damage == "renamed":
        path = path.rename(path.with_name("fedcba9876543210.json"))
    elif damage == "edited":  # re-sealed, so its digest checks; what it says makes another id
        write_record(path, {**stored, "settings": {"config": {"base": None}, "x": 1}, "format": FORMAT})
    else:
        path.write_text(json.dumps({**stored, "settings": {"other": 1}}))
    with pytest.raises(UserError, match=says) as err:
        run.records.get("configuration", path.stem)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError, match="is not an id"):
        run.records.get("configuration", "../../outside")


def test_a_run_directory_opened_for_writing_twice_is_upgraded_once(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(writing, "upgrade", lambda run: calls.append(run.root))
    monkeypatch.setattr(writing, "_UPGRADED", set())
    first = writing.open_for_writing(tmp_path / "run")
    again = writing.open_for_writing(str(tmp_path / "run" / "." ))
    other = writing.open_for_writing(tmp_path / "other")
    assert calls == [first.root, other.root] and again.root == first.root


def test_a_writing_command_run_twice_in_one_process_upgrades_once(tmp_path, monkeypatch):
    from roarfast.rundir.inventory import prune

    calls = []
    monkeypatch.setattr(writing, "upgrade", lambda run: calls.append(run.root))
    monkeypatch.setattr(writing, "_UPGRADED", set())
    _configuration(RunDir(tmp_path / "run"))
    for _ in range(2):
        with pytest.raises(UserError):  # opened for writing, then the name is looked up: no such configuration
            prune(tmp_path / "run", ["no-such-name"])
    assert calls == [tmp_path / "run"]


def test_a_failed_upgrade_is_tried_again(tmp_path, monkeypatch):
    calls = []

    def killed(run):
        calls.append(run.root)
        raise KeyboardInterrupt

    monkeypatch.setattr(writing, "_UPGRADED", set())
    monkeypatch.setattr(writing, "upgrade", killed)
    with pytest.raises(KeyboardInterrupt):
        writing.open_for_writing(tmp_path / "run")
    monkeypatch.setattr(writing, "upgrade", lambda run: calls.append(run.root))
    writing.open_for_writing(tmp_path / "run")
    assert len(calls) == 2


def _snapshot(root):
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(root.rglob("*"))}


def test_a_reader_writes_nothing_and_upgrades_nothing(tmp_path, monkeypatch):
    run = RunDir(tmp_path / "run")
    record, _ = _configuration(run)
    (run.root / "checkpoints" / "base").mkdir(parents=True)  # format 1's place: a writer would migrate it
    for where in (migrate, writing):
        monkeypatch.setattr(where, "upgrade", lambda run: pytest.fail("a reader upgraded"))
    before = _snapshot(run.root)
    from roarfast.rundir.inventory import listing

    listing(run.root)
    RunDir(run.root).records.get("configuration", record.id)
    assert _snapshot(run.root) == before
    assert os.listdir(run.root / "checkpoints") == ["base"]
