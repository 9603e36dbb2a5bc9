"""The built-in datasets, one module each: each registers its loader with roarfast.data.registry.register_dataset
(its name, a one-line description, what a dry run may know without loading it), the loader's keyword arguments
and their defaults being the dataset's options (--data-option), so no list elsewhere names them. The resolver
DATASETS imports every module here at its first lookup (every --help lists them), so a module here stays light: a
loader imports what reads or makes the images (torch, DALI) when it is called. A new built-in dataset is one
module here and its test."""
