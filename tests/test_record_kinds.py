"""Each record kind owns its place, its write and its verified read (roarfast.records): a new kind is its record
type, registered by being defined, and the run directory's one put and get take it from there (a toy kind here);
HEAD, the dataset records, the stage times and a prune's intent are kinds too; a rank store's manifest and a
results row's config go through the same put and get; and every place comes from the one path builder, which
refuses a name that is not one name and a link that leads out of the run directory."""

import json
import sqlite3
from dataclasses import dataclass

import numpy as np
import pytest

from roarfast.common.atomic import write_record
from roarfast.errors import UserError
from roarfast.measurements.db import ResultsDB
from roarfast.measurements.row import RETRAIN, MeasurementKey
from roarfast.measurements.schema import row_digest
from roarfast.records.access import Records
from roarfast.records.dataset import DatasetRecord
from roarfast.records.head import Head
from roarfast.records.ids import digest_id
from roarfast.records.kind import KINDS, Record
from roarfast.records.paths import check_name, place
from roarfast.records.prune import PruneIntent
from roarfast.records.rows import CellRecord
from roarfast.records.stage_times import StageTimes
from roarfast.rundir.directory import RunDir
from roarfast.store.index import RankStore


@dataclass(frozen=True)
class ToyRecord(Record):
    """A kind a contributor adds: what made a toy, stored as toys/<id>.json."""

    colour: str
    size: int

    kind = "toy"
    what = "toy"

    @property
    def id(self) -> str:
        return digest_id({"colour": self.colour, "size": self.size})

    def to_record(self) -> dict:
        return {"colour": self.colour, "size": self.size}

    @classmethod
    def from_record(cls, stored: dict) -> "ToyRecord":
        return cls(stored["colour"], stored["size"])

    @classmethod
    def place(cls, record_id=None, where=None) -> tuple:
        return "toys", f"{record_id}.json"


def test_a_new_kind_is_its_record_type_and_the_run_directory_puts_and_gets_it(tmp_path):
    run = RunDir(tmp_path / "run")
    toy = ToyRecord("red", 3)
    assert KINDS["toy"] is ToyRecord
    assert run.records.put(toy, {**toy.to_record(), "note": "said besides"}) == toy.id
    assert run.records.path("toy", toy.id) == tmp_path / "run" / "toys" / f"{toy.id}.json"
    assert run.records.get("toy", toy.id) == {"colour": "red", "size": 3, "note": "said besides"}
    assert run.records.get(ToyRecord, ToyRecord("blue", 1).id) is None
    with pytest.raises(ValueError, match="does not say what made"):  # what is written is what is read back
        run.records.put(toy, {"colour": "blue", "size": 3})
    with pytest.raises(ValueError, match="is not the place of"):  # nor where another's id names it
        run.records.put(toy, at=run.records.path(ToyRecord, ToyRecord("blue", 1).id))


@pytest.mark.parametrize("damage", ["renamed", "edited", "unsealed"])
def test_a_new_kind_s_record_not_the_one_its_place_gives_is_refused_in_one_line(tmp_path, damage):
    run = RunDir(tmp_path / "run")
    toy = ToyRecord("red", 3)
    run.records.put(toy)
    path = run.records.path(ToyRecord, toy.id)
    asked = toy.id
    if damage == "renamed":  # another toy's place
        asked = ToyRecord("blue", 1).id
        path = path.rename(path.with_name(f"{asked}.json"))
    elif damage == "edited":  # re-sealed, so its digest checks; what it says makes another id
        write_record(path, {"colour": "red", "size": 4})
    else:
        path.write_text(json.dumps({"colour": "red", "size": 3}))
    with pytest.raises(UserError) as err:
        run.records.get(ToyRecord, asked)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_head_dataset_stage_times_and_a_prune_s_intent_are_kinds_at_the_run_directory_s_places(tmp_path):
    run = RunDir(tmp_path)
    head = Head(base="a" * 16, ranks={"grad": "b" * 16}, command="test")
    run.records.put(head)
    assert run.records.path(Head) == run.head_path == tmp_path / "HEAD.json" and run.head() == head
    fingerprint = "f" * 64
    run.records.put(DatasetRecord(fingerprint), {"name": "embedded", "fingerprint": fingerprint})
    assert run.records.path(DatasetRecord, fingerprint) == run.dataset_record_path(fingerprint)
    assert run.dataset_record(fingerprint) == {"name": "embedded", "fingerprint": fingerprint}
    run.records.put(StageTimes({"train": 1.5}))
    assert run.records.path(StageTimes) == run.stage_times_path and run.stage_times() == {"train": 1.5}
    intent = PruneIntent(["c" * 16], [], [["grad", "b" * 16]], [], [], head=False)
    run.records.put(intent)
    assert run.records.path(PruneIntent) == run.prune_intent_path == tmp_path / "claims" / "prune.json"
    assert PruneIntent.from_record(run.records.get(PruneIntent)) == intent


def test_a_dataset_record_is_read_back_only_for_the_data_its_name_gives(tmp_path):
    run = RunDir(tmp_path)
    one, other = "a" * 64, "b" * 64
    run.records.put(DatasetRecord(one), {"name": "embedded", "fingerprint": one})
    run.dataset_record_path(one).rename(run.dataset_record_path(other))
    with pytest.raises(UserError, match="does not describe the data its name gives"):
        run.dataset_record(other)


def test_a_rank_writer_puts_its_manifest_through_the_one_put(tmp_path):
    writer = RankStore(tmp_path).open_writer("grad", "train", shape=(4, 2, 2), dtype="uint16", chunk_size=2,
                                             params={"n": 1}, checkpoint_sha256=None, dataset_fingerprint="d" * 64)
    writer.write_chunk(0, np.zeros((2, 2, 2), np.uint16))
    writer.manifest["params"] = {"n": 2}  # the manifest no longer says what made the store: not written
    with pytest.raises(ValueError, match="does not say what made"):
        writer.write_chunk(1, np.zeros((2, 2, 2), np.uint16))
    writer.close()
    assert RankStore(tmp_path).manifest("grad", "train")["params"] == {"n": 1}


def test_a_row_s_config_is_a_record_written_and_read_back_through_the_one_put_and_get(tmp_path):
    cell = CellRecord({"epochs": 2}, "d" * 64, {"code": "1"}, "0" * 16, "1" * 16, "dataset-mean")
    key = MeasurementKey.of(kind=RETRAIN, dataset="embedded", model="fastnet", method="grad", mode="roar",
                            fill="dataset-mean", fraction=0.5, seed=0, config=cell)
    assert key.config_hash == cell.id and key.config == cell.to_record()  # one digest: the record's id
    path = tmp_path / "results.sqlite"
    with ResultsDB(path) as db:
        db.record(key, {"test_acc": 0.5, "val_acc": None, "epochs": 2, "seconds": 1.0})
        assert db.get(key)["config"] == cell.to_record()
    # the config edited and the row's digest made again: its config_hash no longer is what it says
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        row = dict(conn.execute("SELECT * FROM measurements").fetchone())
        row["config"] = row["config"].replace('"epochs":2', '"epochs":3')
        conn.execute("UPDATE measurements SET config = ?, row_sha256 = ?", (row["config"], row_digest(row)))
    with ResultsDB(path) as db, pytest.raises(UserError) as err:
        db.rows()
    assert str(err.value).startswith(f"{path}: the row (kind=retrain method=grad") and "config_hash" in str(err.value)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/etc", "a\\b", "a\x00b", "a\nb", "a\x7fb"])
def test_the_path_builder_refuses_what_is_not_one_name(tmp_path, name):
    with pytest.raises(UserError, match="cannot name a place in it") as err:
        place(tmp_path, "ok", name)
    assert "\n" not in str(err.value)


def test_the_path_builder_keeps_a_name_as_it_is(tmp_path):
    assert place(tmp_path, "ranks", "pkg.mod:saliency", "0123456789abcdef") == \
        tmp_path / "ranks" / "pkg.mod:saliency" / "0123456789abcdef"
    assert check_name("a b-c_d.json", tmp_path) == "a b-c_d.json"


def test_a_place_outside_the_run_directory_or_through_a_link_out_of_it_is_refused(tmp_path):
    run = RunDir(tmp_path / "run")
    run.records.put(StageTimes({"train": 1.0}))
    outside = tmp_path / "outside"
    outside.mkdir()
    write_record(outside / "stages.json", {"train": 2.0, "format": 2})
    with pytest.raises(UserError, match="is not in"):
        run.records.get(StageTimes, at=outside / "stages.json")
    with pytest.raises(UserError, match="is not in"):
        run.records.get(StageTimes, at=run.root / ".." / "outside" / "stages.json")
    kept = run.root / "kept"  # a folder of the run directory that is a link staying inside it: no way out
    kept.mkdir()
    (run.root / "datasets").symlink_to(kept)
    assert Records(run.root).get(DatasetRecord, "a" * 64) is None
    (run.root / "datasets").unlink()
    (run.root / "datasets").symlink_to(outside)  # one that leads out of it
    with pytest.raises(UserError, match="datasets: it is a symbolic link"):
        run.records.get(DatasetRecord, "a" * 64)
