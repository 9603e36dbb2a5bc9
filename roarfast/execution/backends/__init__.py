"""The executors' backends, one module each: an Executor subclass (roarfast.stages.executor) registered with
roarfast.execution.registry.register_executor, with the dataclass of its own options, if any, each field declaring
its flag and the work it applies to. The resolver EXECUTORS imports every module here at its first lookup (every
--help lists the backends and their flags), so a module here stays light: what it runs with (torch, the stages,
Ray) is imported when it runs. A new backend (Dask, a Slurm array) is one module here and its test; --executor,
its flags and Study(executor=, <name>=) take it from there."""
