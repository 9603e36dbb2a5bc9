"""The dry run warns before training when the cells' planned optimizer steps are below what the model needed to
leave chance on this data (issue 37): by a kept base model's history, by earlier random cells that stayed at
chance, else by a stated floor (the dry run's lines: tests/test_adopted_weights.py)."""

from roarfast.planning.preview import MIN_CELL_STEPS, DataOutline, SplitOutline, learning_warnings
from roarfast.recipe import Recipe
from roarfast.results import RETRAIN, MeasurementKey, ResultsDB
from roarfast.rundir.directory import RunDir

# the data: 2,000 images (200 held out), 10 classes; at batch 128, 15 steps an epoch
DATA = DataOutline(name="embedded", fingerprint="f" * 64, train=SplitOutline(2000, (3, 32, 32)),
                   test=SplitOutline(1000, (3, 32, 32)), val_images=200, num_classes=10, mean=(0.5,) * 3,
                   std=(0.25,) * 3, ground_truth=True)
TWO_EPOCHS = Recipe(epochs=2, batch_size=128)


def base_meta(val_accs) -> dict:
    return {"model": "fastnet", "dataset_fingerprint": DATA.fingerprint, "recipe": {"batch_size": 128, "epochs": 8},
            "history": [{"epoch": e, "val_acc": acc} for e, acc in enumerate(val_accs, start=1)]}


def test_a_base_model_that_left_chance_only_at_epoch_4_warns_of_cells_of_2_epochs(tmp_path):
    run = RunDir(tmp_path / "run")
    meta = base_meta([0.10, 0.11, 0.105, 0.45, 0.6])  # 200 validation images: 11% is not clearly above 10%
    (warning,) = learning_warnings(run, DATA, "fastnet", TWO_EPOCHS, meta, ())
    assert warning.startswith("the cells would train 30 optimizer steps each (2 epochs of 1,800 images at batch 128)")
    assert "left chance only after 4 epoch(s), 60 steps" in warning and "raise --epochs" in warning
    assert learning_warnings(run, DATA, "fastnet", Recipe(epochs=4, batch_size=128), meta, ()) == []
    # another model's record says nothing of this one: the stated floor decides
    (floor,) = learning_warnings(run, DATA, "resnet8", TWO_EPOCHS, meta, ())
    assert f"fewer than {MIN_CELL_STEPS}" in floor and "no record says what resnet8 needs" in floor


def test_earlier_random_cells_at_chance_warn_of_a_plan_no_longer(tmp_path):
    run = RunDir(tmp_path / "run")
    config = {"dataset": DATA.fingerprint, "recipe": Recipe(epochs=3, batch_size=128).to_dict()}
    with ResultsDB(run.results_path) as db:
        for fraction in (0.1, 0.5):
            for seed in range(3):
                key = MeasurementKey.of(kind=RETRAIN, dataset="embedded", model="fastnet", method="random", mode="roar",
                                        fill="dataset-mean", fraction=fraction, seed=seed, config=config)
                db.record(key, {"test_acc": 0.1, "val_acc": 0.1, "epochs": 3, "seconds": 1.0, "versions": {},
                                "test_images": 1000, "test_chance": 0.1})
    (warning,) = learning_warnings(run, DATA, "fastnet", TWO_EPOCHS, {}, ())
    assert "earlier random cells of fastnet on this data stayed at chance (10.0%) with 45 steps (3 epochs)" in warning
    # more steps than those that stayed at chance, and above the floor: nothing said
    assert learning_warnings(run, DATA, "fastnet", Recipe(epochs=8, batch_size=128), {}, ()) == []
