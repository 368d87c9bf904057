"""Policy variables read or assigned as one flat vector in one graph call (learner, actors, evaluator)."""

from __future__ import annotations

import threading

import numpy as np
import tensorflow as tf

from dqn.model.graph_io import HostInput, HostOutput


class FlatWeights:
    """Reads or assigns a list of same-dtype variables as one flat vector, in one graph call.

    Why: weights are read or assigned several times a second for the whole run, and tensors passed between Python
    and TF keep memory for good (dqn/model/graph_io.py); the flat vector moves
    through `dqn.model.graph_io` buffers.
    Calls are serialized by a lock (the buffers are shared).
    """

    def __init__(self, variables: list):
        self._variables = list(variables)
        dtypes = {v.dtype for v in self._variables}
        if len(dtypes) != 1:
            raise ValueError(f"FlatWeights needs variables of one dtype; got {sorted(d.name for d in dtypes)}")
        self._shapes = [tuple(v.shape) for v in self._variables]
        self._sizes = [int(np.prod(shape)) for shape in self._shapes]
        self._offsets = np.cumsum(self._sizes)[:-1]  # where each variable starts in the flat vector, after the first
        dtype = self._variables[0].dtype
        self._lock = threading.Lock()
        self._incoming = HostInput([sum(self._sizes)], dtype)
        self._outgoing = HostOutput([sum(self._sizes)], dtype)
        self._read = tf.function(self._read_flat, autograph=False)
        self._assign = tf.function(self._assign_flat, autograph=False)

    @property
    def shapes(self) -> list[tuple]:
        """Each variable's shape, in order."""
        return list(self._shapes)

    def read(self) -> list[np.ndarray]:
        """The variables' current values (views into one new array, so callers may keep them)."""
        with self._lock:
            self._read()
            flat = self._outgoing.value.copy()
        return [part.reshape(shape) for part, shape in zip(np.split(flat, self._offsets), self._shapes, strict=True)]

    def assign(self, values: list[np.ndarray]) -> None:
        """Sets every variable from `values` (same order and shapes as the variables)."""
        flat = np.concatenate([np.asarray(value).ravel() for value in values])
        with self._lock:
            self._incoming.set(flat)
            self._assign()

    def _read_flat(self):
        self._outgoing.write(tf.concat([tf.reshape(v, [-1]) for v in self._variables], axis=0))

    def _assign_flat(self):
        parts = tf.split(self._incoming.read(), self._sizes)
        for variable, part in zip(self._variables, parts, strict=True):
            variable.assign(tf.reshape(part, variable.shape))
