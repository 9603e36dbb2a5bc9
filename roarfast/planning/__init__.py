"""What a sweep would do and what it costs, found without doing it: the presets and the plan of cells (`grid`),
the dry run's `Preview` (`preview`), each stage's images, bytes, memory and device-hours on this machine or a
stated one (`costs`), a stage's time measured or counted before it runs (`estimate`), and the record of
measured seconds per image that the stages write and the planners read (`step_times`).

`grid`, `preview` and `costs` sit above the stages; `estimate` beside them; `step_times` among the building
blocks, since every training writes to it. None of them imports the extract stage: they take a
`methods.selection.Selection`.
"""
