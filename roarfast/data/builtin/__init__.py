"""The built-in datasets' loaders, one module each (and each loader's outline, where a dry run may describe the
data without reading it). They import torch, so they are declared apart, in roarfast.data.registry's BUILTINS
(a name, a one-line description, the options, the loader's import path), which the CLI lists; a module here is
imported when its dataset is loaded. A new built-in dataset is one module here and its declaration there."""
