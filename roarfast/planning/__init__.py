"""What a sweep would do and what it costs, found without doing it: the presets and the plan of cells (`grid`),
the dry run's `Preview` (`preview`), each stage's images, bytes, memory and device-hours on this machine or a
stated one (`costs`), and a stage's time measured or counted before it runs (`estimate`, from the seconds the
stages recorded: roarfast.stages.step_times).

The planners sit above the stages, beside the executors (neither imports the other). None of them imports the
extract stage: they take a `methods.selection.Selection`.
"""
