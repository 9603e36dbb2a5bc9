"""The utilities every layer above may use, importing nothing of roarfast but `errors`, `version` and the kernels:
option checks (`options`), the plug-in grammar and what a record may import (`plugins`), the resolver idiom
(`resolver`), atomic files and link-refusing writes (`atomic`), hashes and sealed JSON records (`fingerprint`),
the device choice (`device`), progress bars (`progress`) and freed memory kept for reuse (`memory`).

Nothing here knows a stage, a run directory or a dataset: a module that needs one belongs a floor up.
"""
