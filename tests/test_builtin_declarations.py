"""The built-in models and datasets are declared apart from what implements them (the light modules of
roarfast.models.builtins and roarfast.data.builtin, so that every --help lists them without torch; a dataset's
options read from its loader's signature); a declaration that its implementation contradicts, or an
implementation that no declaration names, fails here."""

import inspect
import pkgutil

import pytest

import roarfast.data.builtin
import roarfast.models
import roarfast.models.builtins
from roarfast.data.registry import DATASETS, DatasetEntry, _builtin, loader_options, register_dataset
from roarfast.models import MODELS

#: the modules of roarfast.models that implement no built-in: the declarations (builtins/), the registry, the
#: resolver
_MODEL_PLUMBING = {"builtins", "registry", "spec", "probe"}  # probe: a model checked before training, no model


def _modules(package, skip=()) -> set[str]:
    return {f"{package.__name__}.{module.name}" for module in pkgutil.iter_modules(package.__path__)
            if module.name not in skip}


def test_every_implementation_module_is_named_by_a_declaration():
    declared = {entry.target.partition(":")[0] for entry in MODELS}
    assert declared == _modules(roarfast.models, _MODEL_PLUMBING)


def test_every_module_of_the_built_in_datasets_registers_one():
    assert {entry.module for entry in DATASETS} == _modules(roarfast.data.builtin)


def test_every_dataset_declares_its_loader_s_options_and_an_outline_of_the_same_arguments():
    for entry in DATASETS:
        load = entry.load()
        assert dict(entry.options) == loader_options(load), entry.name
        assert set(entry.read_options) <= set(entry.options)
        if entry.outline is not None:
            outline = _builtin(entry, "/data").outline_of.func
            assert inspect.signature(outline).parameters == inspect.signature(load).parameters, entry.name


def test_a_declaration_its_loader_contradicts_is_refused_when_loaded():
    embedded = DATASETS["embedded"]
    other_default = DatasetEntry("embedded", "", value=embedded.value, options={**embedded.options, "copies": 2})
    with pytest.raises(ValueError, match=r"dataset 'embedded' declares the options .* but its loader "
                                         r"roarfast.data.builtin.embedded:load_embedded takes"):
        _builtin(other_default, None)
    undeclared = DatasetEntry("embedded", "", value=embedded.value, options={"num_train": 5000})
    with pytest.raises(ValueError, match="declares the options"):
        _builtin(undeclared, None)
    other_outline = DatasetEntry("embedded", "", value=embedded.value, options=embedded.options,
                                 outline=DATASETS["imagefolder"].outline)
    with pytest.raises(ValueError, match=r"its outline .*outline_imagefolder should take the loader's arguments "
                                         r"\(num_train: int = 5000, "):
        _builtin(other_outline, None)


def test_an_outline_of_other_arguments_is_refused_when_registered():
    def load_tiles(data_dir, side: int = 8):
        raise AssertionError("never loaded")

    def outline_tiles(data_dir, size: int = 8):
        raise AssertionError("never outlined")

    with pytest.raises(ValueError, match=r"dataset 'tiles': its outline .*outline_tiles should take the loader's "
                                         r"arguments \(data_dir, side: int = 8\)"):
        register_dataset("tiles", "tiles", outline=outline_tiles)(load_tiles)
    assert "tiles" not in DATASETS


def test_read_options_are_options():
    with pytest.raises(ValueError, match=r"read_options \['device'\] are not options"):
        DatasetEntry("tree", "", target="x:y", options={"resize": None}, read_options=("device",))


def test_every_model_declaration_names_a_factory_of_the_declared_signature():
    for entry in MODELS:
        factory = entry.load()
        assert list(inspect.signature(factory).parameters)[:3] == ["num_classes", "image_size", "in_channels"], \
            entry.name


def test_every_builtin_model_is_declared_by_a_module_of_models_builtins():
    """Each module of roarfast.models.builtins declares its models, and each entry names it as its module (what the
    listing orders by after `order`)."""
    assert {entry.module for entry in MODELS} == _modules(roarfast.models.builtins)
