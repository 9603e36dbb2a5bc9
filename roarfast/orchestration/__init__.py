"""What runs a plan: `sweep` (`roarfast sweep`: the base model, the ranks, the plan, the cells through an
executor), `retrain` (`roarfast retrain`: the asked-for cells through the local executor) and `demo` (`roarfast
run`: the quick sweep on the embedded dataset and its report).

It sits above the planners (roarfast.planning) and the executors' backends (roarfast.execution), which sit above
the stages they chain (roarfast.stages); nothing below imports it.
"""
