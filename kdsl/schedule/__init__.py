"""Schedules: validated primitive records on the stage graph, and hints -> primitives."""
from .hints import Hint, apply_hints, schedule
from .schedule import Schedule
from .stage import StageSchedule

__all__ = ["Schedule", "StageSchedule", "Hint", "schedule", "apply_hints"]
