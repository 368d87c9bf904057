"""Sampled batches staged in TF variables by a daemon thread: the train loop never sits inside a Reverb call.

A dataset iterator blocks while the replay server is down, and Python runs signal handlers only
between bytecodes; iterating on a daemon thread keeps the main loop responsive to SIGTERM and able
to report "no new data" while it waits.

Why variables and not a queue of tensors: every tensor handed to Python keeps memory for good
(dqn/model/graph_io.py), and a tensor per batch would grow the learner for the whole run. Here the thread copies
each batch into one of two slots of variables inside a `tf.function`, and the train step reads the slot in-graph:
no tensor crosses into Python per batch.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import tensorflow as tf

log = logging.getLogger("learner")


class StagedBatches:
    """Fills `slots` (each a nest of variables shaped like one dataset element) from `make_dataset()` on a thread.

    `get()` hands out the index of a filled slot, `release()` gives it back to be refilled; with two slots the
    thread stages the next batch while the train step reads the current one.
    """

    def __init__(self, make_dataset: Callable[[], tf.data.Dataset], finish: Callable | None = None,
                 num_slots: int = 2):
        """`finish(*element)`, if given, runs in-graph on each dataset element before it is staged."""
        self._make_dataset = make_dataset
        self._finish = finish or (lambda *element: element)
        first = make_dataset()  # Reverb connects only when iterated: this just reads the element spec
        for leaf in tf.nest.flatten(first.element_spec):
            if not leaf.shape.is_fully_defined():
                raise ValueError(f"staged batches need fixed shapes; the dataset gives {leaf.shape}")
        finished = first.map(self._finish).element_spec  # the slots take the shapes `finish` gives
        self.slots = [tf.nest.map_structure(
            lambda leaf: tf.Variable(tf.zeros(leaf.shape, leaf.dtype), trainable=False), finished)
            for _ in range(num_slots)]
        self._free: queue.Queue = queue.Queue()
        self._filled: queue.Queue = queue.Queue()
        for index in range(num_slots):
            self._free.put(index)
        self._stop = threading.Event()
        self.idle_since = time.monotonic()
        threading.Thread(target=self._run, args=(first,), name="batch-feed", daemon=True).start()

    def _stagers(self, iterator) -> list:
        """One graph function per slot that copies the iterator's next finished element into that slot.

        The iterator is captured, not passed: an iterator argument costs Python time on every call to match its
        type. A rebuilt dataset gets new functions.
        """
        def stager(slot):
            @tf.function(autograph=False)
            def stage():
                tf.nest.map_structure(lambda variable, value: variable.assign(value, read_value=False),
                                      slot, self._finish(*next(iterator)))

            return stage

        return [stager(slot) for slot in self.slots]

    def get(self, timeout_s: float) -> int | None:
        """The index of a slot holding the next (experience, sample info) batch, or None after `timeout_s`."""
        try:
            index = self._filled.get(timeout=timeout_s)
        except queue.Empty:
            return None
        self.idle_since = time.monotonic()
        return index

    def release(self, index: int) -> None:
        """Gives a slot back once the train step has read it."""
        self._free.put(index)

    def close(self) -> None:
        """Stops feeding (a call stuck in Reverb is abandoned with the daemon thread)."""
        self._stop.set()

    def _free_slot(self) -> int | None:
        while not self._stop.is_set():
            try:
                return self._free.get(timeout=0.5)
            except queue.Empty:
                continue
        return None

    def _run(self, dataset: tf.data.Dataset) -> None:
        while not self._stop.is_set():
            index = None
            try:
                stage = self._stagers(iter(dataset))
                while True:
                    index = self._free_slot()
                    if index is None:
                        return
                    stage[index]()
                    self._filled.put(index)
                    index = None
            except (tf.errors.OutOfRangeError, tf.errors.UnavailableError, tf.errors.DeadlineExceededError) as error:
                log.debug("replay dataset ended: %s", type(error).__name__)
            except Exception:  # noqa: BLE001 - keep the feed alive; the train loop reports the gap
                log.exception("replay dataset failed; rebuilding it")
                self._stop.wait(1.0)
            if index is not None:
                self._free.put(index)  # the slot was not filled
            # A dataset with rate_limiter_timeout_ms ends quietly when no sample came in time: rebuild it.
            dataset = self._make_dataset()
