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

import numpy as np
import tensorflow as tf

log = logging.getLogger("learner")


class StagedBatches:
    """Fills `slots` (each a nest of variables shaped like one dataset element) from `make_dataset()` on a thread.

    `get()` hands out the index of a filled slot, `release()` gives it back to be refilled; with two slots the
    thread stages the next batch while the train step reads the current one.
    """

    def __init__(self, make_dataset: Callable[[], tf.data.Dataset], finish: Callable | None = None,
                 num_slots: int = 2, check: Callable | None = None,
                 on_bad: Callable[[np.ndarray, np.ndarray], None] | None = None,
                 on_unreadable: Callable[[Exception], None] | None = None):
        """`finish(*element)`, if given, runs in-graph on each dataset element before it is staged.

        `check(experience, info)`, if given, runs in-graph too and gives one int per item, 0 if it is fit to train
        on: a batch with any other is never handed out, and `on_bad(keys, codes)` gets its items' keys and codes
        (called on the feed thread, which goes on with the next batch). A batch the dataset fails to read
        (InvalidArgumentError: an item of shapes or dtypes other than the table signature's) goes to
        `on_unreadable(error)`, and the feed goes on with the next batch of the same dataset.
        """
        self._make_dataset = make_dataset
        self._finish = finish or (lambda *element: element)
        self._check = check
        self._on_bad = on_bad or (lambda keys, codes: None)
        self._on_unreadable = on_unreadable
        self._rejected: list[tuple[np.ndarray, np.ndarray]] = []  # filled by the check's callback, in-graph
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
                element = next(iterator)
                if self._check is not None:
                    self._reject_bad_items(element)
                tf.nest.map_structure(lambda variable, value: variable.assign(value, read_value=False),
                                      slot, self._finish(*element))

            return stage

        return [stager(slot) for slot in self.slots]

    def _stage_checked(self, stage: Callable[[], None]) -> bool:
        """Runs one staging call; False if the batch it staged is not to be trained on (reported, counted)."""
        try:
            stage()
        except tf.errors.InvalidArgumentError as error:
            if self._on_unreadable is None:
                raise
            # Reverb's sampler has dropped the item it could not read; the same iterator goes on with the next.
            self._on_unreadable(error)
            return False
        if self._rejected:
            self._on_bad(*self._rejected.pop())
            self._rejected.clear()
            return False
        return True

    def _reject_bad_items(self, element) -> None:
        """In-graph: hands the batch's keys and problem codes to Python only when an item is bad (a rare event)."""
        codes = self._check(*element)
        keys = element[1].key

        def reject():
            tf.numpy_function(lambda k, c: self._rejected.append((k.copy(), c.copy())), [keys, codes], [],
                              stateful=True)
            return tf.constant(True)

        tf.cond(tf.reduce_any(codes != 0), reject, lambda: tf.constant(False))

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
                    if self._stage_checked(stage[index]):
                        self._filled.put(index)
                    else:  # the slot holds no batch to train on: refill it
                        self._free.put(index)
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
