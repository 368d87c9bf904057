"""The evaluator's result lines as `local` reads them while a run goes on."""

from __future__ import annotations

import json
import logging
import os

from dqn.settings.config import role_dir

log = logging.getLogger("local")


class EvalRecords:
    """Reads the evaluator's result lines (`evaluator/evals.jsonl`) as they are appended; only torn ones skipped."""

    def __init__(self, root: str):
        self._path = os.path.join(root, role_dir("evaluator"), "evals.jsonl")
        self._offset = 0

    def new(self) -> list[dict]:
        """The complete lines appended since the last call."""
        try:
            with open(self._path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written is read next time
        self._offset += len(complete)
        return [record for line in complete.decode("utf-8", errors="replace").splitlines() if line.strip()
                if (record := self._parse(line)) is not None]

    def _parse(self, line: str) -> dict | None:
        """One record; from a line that a full disk tore and the next record continued, that record; else None.

        Every record starts with its train step (evaluator/evaluate.py writes it first).
        """
        for start in dict.fromkeys((0, line.rfind('{"train_step"'))):
            try:
                record = json.loads(line[max(start, 0):])
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "train_step" in record:
                if start > 0:
                    log.warning("%s: skipped the torn start of a line: %.80s", self._path, line[:start])
                return record
        log.warning("%s: skipped an unreadable line: %.80s", self._path, line)
        return None
