"""The record kind of a run directory's stage times: `stages.json`, the seconds each stage took ({stage: seconds,
or {part: seconds}}), merged by the sweep (RunDir.record_stage_time) and shown by the report; sealed with its
digest. A run directory keeps one."""

from dataclasses import dataclass

from roarfast.records.dataset import RECORD_FORMAT
from roarfast.records.kind import Record


@dataclass(frozen=True)
class StageTimes(Record):
    """The seconds of each stage: {stage: seconds, or {part: seconds}}."""

    times: dict

    kind = "stage times"
    what = "stage-time"
    format = RECORD_FORMAT
    repair = "remove it (the next sweep records the stage times again) or restore it"

    def to_record(self) -> dict:
        return self.times

    @classmethod
    def from_record(cls, stored: dict) -> "StageTimes":
        if not isinstance(stored, dict):
            raise TypeError(f"stage times are {{stage: seconds}}, not {type(stored).__name__}")
        return cls(stored)

    @classmethod
    def place(cls, record_id=None, where=None) -> tuple:
        return ("stages.json",)

    @staticmethod
    def older(stored: dict) -> bool:
        return "format" not in stored
