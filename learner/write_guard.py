"""The learner's writes that may fail on a full or failing disk, without raising (dqn/process/write_guard.py)."""

from dqn.process.write_guard import WRITE_ERRORS, WriteGuard

__all__ = ["WRITE_ERRORS", "WriteGuard", "try_write"]

#: The learner's guarded writes: `try_write("policy export", export_policy, saver, path, step)`.
try_write = WriteGuard("learner")
