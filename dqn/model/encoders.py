"""How each observation part enters the Q-network: scaled features, one-hot indices, a conv encoder for images.

The parts travel and sit in replay in their own compact dtype (dqn/envs/spaces.py); the network converts them, so
every role agrees on the conversion because it follows from the spec alone. A Dict/Tuple observation gets one
encoder per part and TF-Agents' `preprocessing_combiner` concatenates them before the dense layers.

The rules:
- rank 2-3 parts are images: (height, width[, channels]), channels last; a part shaped (C, H, W) with C <= 4 < W is
  read channels first and moved last. A conv stack is chosen from the smaller spatial side S unless
  `--conv-layer-params` says otherwise: S >= 36 the Nature DQN stack (8x8/4, 4x4/2, 3x3/1), 16 <= S < 36 a 4x4/2,
  3x3/1 stack, 5 <= S < 16 two 3x3 stride-1 layers, 3 <= S < 5 one, S < 3 none (flattened).
  Integer images are divided by their bound (uint8 frames by 255), unless they hold category codes
  (`image_encoding`): then each cell's value 0..CODE_DEPTH-1 in each channel becomes a one-hot vector, so the conv
  layers see (height, width, channels * CODE_DEPTH).
- integer parts whose values span 3 or more indices are one-hot encoded: a single integer (Discrete) up to 4,096
  values, each element of a vector (MultiDiscrete) up to 256;
- everything else is a feature vector: cast to float32 and scaled by `observation_scaling`.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dqn.envs.image_codes import CODE_DEPTH, is_integer_image
from dqn.envs.spaces import is_image, is_nested

#: Conv stacks (filters, kernel, stride) by the image's smaller spatial side, largest first: (minimum side, stack).
AUTO_CONV_STACKS = (
    (36, ((32, 8, 4), (64, 4, 2), (64, 3, 1))),  # Nature DQN (Atari frames of 84 x 84)
    (16, ((32, 4, 2), (64, 3, 1))),
    (5, ((16, 3, 1), (32, 3, 1))),  # small grids: every cell stays in view of a stride-1 kernel
    (3, ((16, 3, 1),)),
)
#: Integer vector parts with more distinct values per element than this are features, not one-hot indices.
MAX_ONE_HOT = 256
#: One integer (gymnasium's Discrete: a state's index, a category by definition) is one-hot up to this many values;
#: its one-hot input then feeds the first dense layer at most this many rows of weights (4 MB at 256 units).
MAX_ONE_HOT_SCALAR = 4096
#: Bounds above this are "unbounded" in practice (some envs use float32's max); such features stay unscaled.
LARGEST_SCALED_BOUND = 1e6


def _dtype(spec) -> np.dtype:
    """The numpy dtype of an array or tensor spec."""
    return np.dtype(tf.as_dtype(spec.dtype).as_numpy_dtype)


def channels_first(shape: tuple) -> bool:
    """(C, H, W) with few channels: read channels first (e.g. (3, 64, 64) or a (4, 84, 84) frame stack)."""
    return len(shape) == 3 and shape[0] <= 4 < shape[2]


def image_size(shape: tuple) -> tuple[int, int, int]:
    """(height, width, channels) of an image part as the conv layers see it."""
    if len(shape) == 2:
        return shape[0], shape[1], 1
    if channels_first(shape):
        return shape[1], shape[2], shape[0]
    return tuple(shape)


def auto_conv_layers(shape: tuple) -> tuple[tuple[int, int, int], ...]:
    """The conv stack for an image part from its smaller spatial side (AUTO_CONV_STACKS); () below 3."""
    height, width, _ = image_size(shape)
    side = min(height, width)
    return next((stack for minimum, stack in AUTO_CONV_STACKS if side >= minimum), ())


def conv_misfit(shape: tuple, layers) -> str | None:
    """Why `layers` (filters, kernel, stride) do not fit an image part of `shape` (valid padding), or None."""
    height, width, _ = image_size(shape)
    for number, (filters, kernel, stride) in enumerate(layers, 1):
        if min(height, width) < kernel:
            return (f"layer {number} ({filters},{kernel},{stride}) needs at least {kernel}x{kernel} but gets "
                    f"{height}x{width} from an image of shape {tuple(shape)}")
        height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
    return None


def one_hot_depth(spec) -> int | None:
    """Indices per element for a one-hot part, else None.

    Integer parts only: rank 0 with 3..MAX_ONE_HOT_SCALAR values, rank 1 with 3..MAX_ONE_HOT values per element.
    """
    if not np.issubdtype(_dtype(spec), np.integer) or len(spec.shape) > 1:
        return None
    low, high = np.asarray(spec.minimum, np.int64), np.asarray(spec.maximum, np.int64)
    depth = int(np.max(high - low)) + 1
    return depth if 2 < depth <= (MAX_ONE_HOT_SCALAR if len(spec.shape) == 0 else MAX_ONE_HOT) else None


def feature_scale(spec, mode: str) -> np.ndarray | None:
    """Per-feature factors that bring finite bounds to [-1, 1]: 1 / max(|low|, |high|), 1 where unbounded.

    mode "narrow": only features bounded within 1 are scaled (up); wider bounds are often loose caps (a max speed)
    that dividing by would shrink typical values far below 1. "bounds": every bounded feature. "none": None.
    None also when no feature would change.
    """
    if mode == "none":
        return None
    shape = tuple(spec.shape)
    low = np.broadcast_to(np.asarray(spec.minimum, np.float64), shape)
    high = np.broadcast_to(np.asarray(spec.maximum, np.float64), shape)
    bound = np.maximum(np.abs(low), np.abs(high))
    scalable = np.isfinite(bound) & (bound > 0) & (bound <= (1.0 if mode == "narrow" else LARGEST_SCALED_BOUND))
    scale = np.ones(shape, np.float32)
    scale[scalable] = 1.0 / bound[scalable]
    return None if np.all(scale == 1.0) else scale


class OneHot(tf.keras.layers.Layer):
    """Integer indices [B] or [B, k] (each from its own `low`) -> one-hot rows [B, k * depth]."""

    def __init__(self, low, depth: int, **kwargs):
        super().__init__(**kwargs)
        self.low = np.asarray(low, np.int64).tolist()
        self.depth = depth

    def call(self, indices):
        """One-hot of indices - low, flattened per example."""
        shifted = tf.cast(indices, tf.int32) - tf.constant(self.low, tf.int32)
        return tf.reshape(tf.one_hot(shifted, self.depth), [tf.shape(indices)[0], -1])

    def get_config(self) -> dict:
        """Constructor arguments (TF-Agents copies preprocessing layers through their config)."""
        return {**super().get_config(), "low": self.low, "depth": self.depth}


@tf.keras.utils.register_keras_serializable(package="dqn")  # TF-Agents copies Sequential encoders by config
class CodeOneHot(tf.keras.layers.Layer):
    """Category codes [B, H, W, C] -> one-hot [B, H, W, C * depth]; a code outside 0..depth-1 gives all zeros."""

    def __init__(self, depth: int, **kwargs):
        super().__init__(**kwargs)
        self.depth = depth

    def call(self, codes):
        """One-hot of every cell's code in every channel, the channels of one code next to each other."""
        height, width, channels = codes.shape[1:]
        one_hot = tf.one_hot(tf.cast(codes, tf.int32), self.depth, dtype=self.compute_dtype)
        return tf.reshape(one_hot, [-1, height, width, channels * self.depth])

    def get_config(self) -> dict:
        """Constructor arguments (TF-Agents copies preprocessing layers through their config)."""
        return {**super().get_config(), "depth": self.depth}


def _image_input_layers(spec, image_encoding: str) -> list:
    """Cast (and scale integer images by their bound, or one-hot their codes), laid out as (height, width, channels).

    `image_encoding` is resolved (scaled or one-hot, never auto); one-hot applies to integer images only.
    """
    layout = []
    if len(spec.shape) == 2:
        layout.append(tf.keras.layers.Reshape((*spec.shape, 1)))
    elif channels_first(tuple(spec.shape)):
        layout.append(tf.keras.layers.Permute((2, 3, 1)))
    if image_encoding == "one-hot" and is_integer_image(spec):
        return [*layout, CodeOneHot(CODE_DEPTH)]
    bound = max(abs(float(np.max(spec.minimum))), abs(float(np.max(spec.maximum))))
    scale = 1.0 / bound if np.issubdtype(_dtype(spec), np.integer) and 0 < bound <= LARGEST_SCALED_BOUND else 1.0
    return [tf.keras.layers.Rescaling(scale), *layout]


def _feature_layers(spec, mode: str) -> list:
    scale = feature_scale(spec, mode)
    return [tf.keras.layers.Rescaling(1.0 if scale is None else scale.tolist())]


def part_encoder(spec, conv_layer_params, observation_scaling: str, image_encoding: str) -> tf.keras.layers.Layer:
    """One part's encoder for a nested observation: [B, ...] -> [B, features]."""
    if is_image(spec):
        layers = _image_input_layers(spec, image_encoding)
        for filters, kernel, stride in conv_layer_params or auto_conv_layers(tuple(spec.shape)):
            layers.append(tf.keras.layers.Conv2D(filters, kernel, stride, activation="relu"))
        return tf.keras.Sequential([*layers, tf.keras.layers.Flatten()])
    depth = one_hot_depth(spec)
    if depth is not None:
        return OneHot(spec.minimum, depth)
    return tf.keras.Sequential([*_feature_layers(spec, observation_scaling), tf.keras.layers.Flatten()])


def input_kwargs(observation_spec, conv_layer_params, observation_scaling: str, image_encoding: str) -> dict:
    """QNetwork / QRnnNetwork arguments for the observation's encoders (preprocessing layers, combiner, convs).

    A single float feature vector keeps the plain MLP input (a Rescaling layer only where scaling changes
    something), so such networks stay the numpy mirror's; a single image keeps TF-Agents' own conv layers.
    """
    if is_nested(observation_spec):
        encoders = tf.nest.map_structure(
            lambda spec: part_encoder(spec, conv_layer_params, observation_scaling, image_encoding), observation_spec)
        return {"preprocessing_layers": encoders, "preprocessing_combiner": tf.keras.layers.Concatenate(axis=-1)}
    spec = observation_spec
    if is_image(spec):
        convs = conv_layer_params or auto_conv_layers(tuple(spec.shape))
        return {"preprocessing_layers": tf.keras.Sequential(_image_input_layers(spec, image_encoding)),
                "conv_layer_params": tuple(convs) or None}
    depth = one_hot_depth(spec)
    if depth is not None:
        return {"preprocessing_layers": OneHot(spec.minimum, depth)}
    if _dtype(spec) == np.float32:
        scale = feature_scale(spec, observation_scaling)
        if scale is None:
            return {}
        return {"preprocessing_layers": tf.keras.layers.Rescaling(scale.tolist(), name="observation_scaling")}
    return {"preprocessing_layers": tf.keras.Sequential(_feature_layers(spec, observation_scaling))}
