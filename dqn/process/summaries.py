"""TensorBoard scalars written in one graph call per set of names (any role)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dqn.model.graph_io import HostInput


class GraphScalars:
    """Writes a dict of scalars to a summary writer in one graph call.

    Eager `tf.summary.scalar` calls pass tensors between Python and TF, which keep memory for good.
    One traced function per set of names reads the step and all values from a `HostInput`, so no tensor crosses
    between Python and TF at all.
    """

    def __init__(self, writer):
        self._writer = writer
        self._functions: dict[tuple[str, ...], tuple[object, HostInput]] = {}

    def write(self, step: int, scalars: dict[str, float]) -> None:
        """Writes every scalar at `step`."""
        names = tuple(sorted(scalars))
        if names not in self._functions:
            self._functions[names] = self._graph(names)
        function, values = self._functions[names]
        # float64 holds every train step exactly up to 2**53 and every float32 value.
        values.set([step, *(scalars[name] for name in names)])
        function()

    def _graph(self, names: tuple[str, ...]):
        writer, values = self._writer, HostInput([len(names) + 1], np.float64)

        @tf.function(autograph=False)
        def write():
            step_and_values = values.read()
            with writer.as_default(step=tf.cast(step_and_values[0], tf.int64)):
                for index, name in enumerate(names):
                    tf.summary.scalar(name, tf.cast(step_and_values[index + 1], tf.float32))

        return write, values
