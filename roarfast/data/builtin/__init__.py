"""The built-in datasets, one module each: a module defines its loader and registers it with DATASETS
(roarfast.data.registry.loader_entry: a name, a one-line description, the options read from the loader's
signature), which imports every module here at its first lookup. A new built-in dataset is one new module."""
