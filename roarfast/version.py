"""roarfast's version, in a module of its own: the records that say what made a result (rank stores,
results rows, checkpoints) import it without importing the package root (which would make them depend on
everything `roarfast` hands out)."""

__version__ = "0.1.0"
