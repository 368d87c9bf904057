"""The Q-network of a config and an env's observation spec: MLP, conv net or LSTM, with the input encoders inside.

Every role makes the same network from the settings and the spec alone, so weights published by the learner fit
every reader. Why observations are converted inside the network (dqn/model/encoders.py): replay, actors and
exported policies all keep raw observations in their compact dtypes, and every role's network agrees because the
conversion comes from the env's spec alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import tensorflow as tf
from tf_agents.networks import q_network, q_rnn_network

from dqn.envs.making import EnvOptions
from dqn.envs.spaces import is_nested
from dqn.model.branching import BranchingQNetwork
from dqn.model.encoders import conv_misfit, input_kwargs, is_image
from dqn.model.layer_norm import NormalizedQNetwork, normalize_hidden_layers
from dqn.settings.config import CommonConfig
from dqn.settings.loading import ConfigError


def check_network_input(config: CommonConfig, observation_spec, action_spec=None) -> None:
    """Explicit conv layers need image parts and must fit each of them; ConfigError naming the misfit otherwise.

    A branching Q-network (vector actions) is feed-forward: an LSTM is refused with it.
    """
    if action_spec is not None and tuple(action_spec.shape) and config.lstm_size:
        raise ConfigError("lstm_size", f"env {config.env_id!r} has more action combinations than --max-flat-actions "
                                       f"{config.max_flat_actions}, which a branching Q-network takes, and it has no "
                                       "recurrent form: leave lstm_size unset, or raise --max-flat-actions")
    if config.conv_layer_params is None:
        return
    parts = tf.nest.flatten(observation_spec)
    images = [spec for spec in parts if is_image(spec)]
    if not images:
        shapes = ", ".join(str(tuple(spec.shape)) for spec in parts)
        raise ConfigError("conv_layer_params", f"needs image observations (height, width[, channels]); env "
                                               f"{config.env_id!r} observes shape {shapes}: leave it unset (none) "
                                               "for an MLP")
    for spec in images:
        misfit = conv_misfit(tuple(spec.shape), config.conv_layers())
        if misfit:
            part = f" (part {spec.name!r})" if is_nested(observation_spec) else ""
            raise ConfigError("conv_layer_params", f"does not fit env {config.env_id!r}'s images{part}: {misfit}; "
                                                   "leave it unset for a stack chosen from the image size")


@functools.lru_cache(maxsize=1)
def fast_bfloat16() -> bool:
    """Whether this machine computes bfloat16 natively: a GPU, or an x86 CPU with AMX or AVX512-BF16."""
    if tf.config.list_physical_devices("GPU"):
        return True
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            flags = next((line.split(":", 1)[1].split() for line in handle if line.startswith("flags")), [])
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def resolved_compute_dtype(config: CommonConfig) -> str:
    """float32 or bfloat16: compute_dtype with auto decided for this machine and network.

    auto keeps float32 for recurrent networks (bfloat16 is refused with them) and on machines that would emulate
    bfloat16, where it is slower than float32.
    """
    if config.compute_dtype != "auto":
        return config.compute_dtype
    return "bfloat16" if config.lstm_size is None and fast_bfloat16() else "float32"


@contextlib.contextmanager
def keras_dtype_policy(name: str):
    """Keras layers made inside compute in the policy `name` (e.g. mixed_bfloat16); the policy is process-wide."""
    previous = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        tf.keras.mixed_precision.set_global_policy(previous)


class MixedPrecisionQNetwork(q_network.QNetwork):
    """TF-Agents' QNetwork whose hidden layers compute in bfloat16 (Keras mixed precision: float32 weights).

    The Q-value layer computes in float32: the TD error is a small difference of Q-values, and bfloat16 keeps ~3
    significant digits. The object graph is QNetwork's (same checkpoint keys, same weight order), so checkpoints
    and published weights fit float32 networks: roles and restarts may differ in compute_dtype.
    """

    def __init__(self, input_tensor_spec, action_spec, preprocessing_layers=None, preprocessing_combiner=None,
                 conv_layer_params=None, fc_layer_params=(75, 40), layer_norm=False, name="QNetwork"):
        with keras_dtype_policy("mixed_bfloat16"):  # dtype None: every layer takes the policy
            super().__init__(input_tensor_spec, action_spec, preprocessing_layers=preprocessing_layers,
                             preprocessing_combiner=preprocessing_combiner, conv_layer_params=conv_layer_params,
                             fc_layer_params=fc_layer_params, dtype=None, name=name)
        if layer_norm:
            normalize_hidden_layers(self._encoder)
        # QNetwork takes no output layer, so its own (not built yet) is replaced by a float32 twin.
        bf16 = self._q_value_layer
        self._q_value_layer = tf.keras.layers.Dense(
            bf16.units, activation=bf16.activation, kernel_initializer=bf16.kernel_initializer,
            bias_initializer=bf16.bias_initializer, dtype=tf.float32)


#: The settings `make_q_network` builds from, beside the specs (compute_dtype leaves the variables as they are), and
#: `action_mask_input`, which decides whether the mask is part of the network's input (dqn/model/agent.py).
NETWORK_SETTINGS = ("conv_layer_params", "fc_layer_params", "layer_norm", "lstm_size", "image_encoding",
                    "observation_scaling", "action_mask_input")
#: What a Q-network's layout follows: its own settings, the env and how it is made (its observation and action
#: specs). A learner checkpoint, or a replay checkpoint's weights, fits only a network made from the same values.
LAYOUT_SETTINGS = ("env_id", *NETWORK_SETTINGS, *(field.name for field in dataclasses.fields(EnvOptions)))


def layout_changes(recorded: dict, now: dict) -> list[str]:
    """The layout settings whose values differ between two settings dicts (`to_dict`), as "name (then X, now Y)"."""
    return [f"{name} (then {recorded[name]!r}, now {now[name]!r})" for name in LAYOUT_SETTINGS
            if name in recorded and name in now and recorded[name] != now[name]]


def make_q_network(config: CommonConfig, observation_spec, action_spec):
    """QNetwork (MLP or conv; bfloat16 or layer_norm: its subclasses), or QRnnNetwork with lstm_size.

    Why after: an LSTM's output is tanh-bounded, so Q-values read straight off it (one linear layer) can only
    reach returns in the tens through slowly growing weights; a ReLU MLP between the LSTM and the Q-values
    scales freely, as in the feed-forward network. `config.image_encoding` must be resolved (DqnBuilder does it):
    roles that guessed differently would build networks whose weights do not fit each other. Vector actions (a
    multi-discrete layout too large to number) get a `BranchingQNetwork`, in float32.
    """
    if config.image_encoding == "auto":
        raise ValueError("image_encoding auto must be resolved before the network is built (DqnBuilder does it)")
    if tuple(action_spec.shape):
        encoders = input_kwargs(observation_spec, config.conv_layers(), config.observation_scaling,
                                config.image_encoding)
        return BranchingQNetwork(observation_spec, tuple(action_spec.maximum.reshape(-1) + 1),
                                 fc_layer_params=config.fc_layer_params, layer_norm=config.layer_norm, **encoders)
    if resolved_compute_dtype(config) == "bfloat16":
        with keras_dtype_policy("mixed_bfloat16"):  # the input encoders too (a Dict's image parts have convs)
            encoders = input_kwargs(observation_spec, config.conv_layers(), config.observation_scaling,
                                    config.image_encoding)
        return MixedPrecisionQNetwork(observation_spec, action_spec, fc_layer_params=config.fc_layer_params,
                                      layer_norm=config.layer_norm, **encoders)
    encoders = input_kwargs(observation_spec, config.conv_layers(), config.observation_scaling, config.image_encoding)
    if config.lstm_size:
        return q_rnn_network.QRnnNetwork(observation_spec, action_spec, input_fc_layer_params=None,
                                         lstm_size=config.lstm_size, output_fc_layer_params=config.fc_layer_params,
                                         **encoders)
    network = NormalizedQNetwork if config.layer_norm else q_network.QNetwork
    return network(observation_spec, action_spec, fc_layer_params=config.fc_layer_params, **encoders)
