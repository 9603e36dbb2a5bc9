"""Where the work runs: the executors that train a sweep's cells (`executors`: in this process, in cell processes
side by side, or as Ray tasks, through one in-flight loop that claims, records and marks failures) and Ray as the
stages use it (`ray_cluster`: the executors' names, `RayOptions`, connecting, what the live nodes hold).

`executors` sits above the stages (it runs a `CellTrainer` and the worker side in `stages.cell_workers`);
`ray_cluster` is a utility, below the stages, that imports only `common` and `errors`.
"""
