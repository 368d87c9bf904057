"""Moving numpy values in and out of graph functions without creating EagerTensors.

Tensors passed between Python and TF keep memory for good on Python 3.11 + TF 2.15, so a call per env step or
per batch that passes them grows the process for as long as it runs. Inside a graph, `tf.numpy_function` hands plain
numpy arrays to Python and back, so a graph function that takes no arguments and returns nothing, pulling its
inputs from a `HostInput` and pushing its results to a `HostOutput`, creates no such tensor.

Neither class is thread-safe: one caller sets, calls the graph function, then reads.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


class HostInput:
    """A numpy array of fixed shape and dtype that graph code reads at call time; `set()` it before the call."""

    def __init__(self, shape, dtype):
        self._dtype = tf.as_dtype(dtype)
        self._value = np.zeros(shape, self._dtype.as_numpy_dtype)

    def set(self, value) -> None:
        """The value the next graph call reads (copied into this input's own array)."""
        np.copyto(self._value, value, casting="same_kind")

    def read(self) -> tf.Tensor:
        """In graph code: the value set last, as a tensor of this input's shape."""
        value = tf.numpy_function(lambda: self._value, [], self._dtype, stateful=True)
        return tf.ensure_shape(value, self._value.shape)


class HostOutput:
    """A numpy array of fixed shape and dtype that graph code writes at call time; `value` after the call."""

    def __init__(self, shape, dtype):
        self.value = np.zeros(shape, tf.as_dtype(dtype).as_numpy_dtype)

    def write(self, tensor: tf.Tensor) -> None:
        """In graph code: copies `tensor` into `value` when the op runs (stateful, so it is never pruned)."""
        tf.numpy_function(lambda array: np.copyto(self.value, array), [tensor], [], stateful=True)
