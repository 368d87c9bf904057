"""Trust in control items and replay items: signatures under the shared key, the weights' train-step rule, the
learner's in-graph checks of sampled items, and the shared key as a setting that is never written or shown."""

import json

import numpy as np
import pytest

from dqn.remote.item_trust import (
    MAX_TRAIN_STEPS_PER_S,
    TRAIN_STEP_ALLOWANCE,
    AcceptedStep,
    ItemSigner,
    implausible_weights,
)
from dqn.settings import loading as config_loading
from dqn.settings.config import LearnerConfig, LocalConfig
from dqn.settings.loading import ConfigError

KEY = "k" * 32


def test_a_signature_holds_for_its_own_item_only():
    signer, weights = ItemSigner(KEY), [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32)]
    signature = signer.weights(weights, 500, 100)
    assert len(signature) == 64 and signer.refusal(signature, signer.weights(weights, 500, 100)) is None
    for other in (signer.weights(weights, 501, 100), signer.weights(weights, 500, 0),
                  signer.weights([weights[0] + 1, weights[1]], 500, 100),
                  signer.weights([weights[0].reshape(3, 2), weights[1]], 500, 100),  # same bytes, other shape
                  ItemSigner("x" * 32).weights(weights, 500, 100), signer.reset_request(500)):
        assert signer.refusal(other, signer.weights(weights, 500, 100)) == "signed with another key, or altered"
    assert "unsigned" in signer.refusal(b"", signer.weights(weights, 500, 100))
    assert signer.refusal(signer.reset_request(7), signer.reset_request(7)) is None


def test_without_a_key_nothing_is_signed_and_everything_is_accepted():
    signer = ItemSigner(None)
    assert not signer.signing and signer.weights([np.ones(2)], 5, 0) == b"" and signer.reset_request(5) == b""
    assert signer.refusal(b"", b"") is None and signer.refusal(b"anything", b"") is None


def test_the_train_step_rule_refuses_what_no_learner_reaches_and_accepts_restarts():
    last = AcceptedStep(10_000, at=100.0)
    assert implausible_weights(10**12, 0, last, now=101.0) is not None
    assert implausible_weights(10_000 + TRAIN_STEP_ALLOWANCE + 1, 0, last, now=100.0) is not None
    # A real learner: any step it can have trained since, whatever the publish interval.
    assert implausible_weights(10_000 + TRAIN_STEP_ALLOWANCE, 0, last, now=100.0) is None
    assert implausible_weights(10_000 + TRAIN_STEP_ALLOWANCE + 60 * MAX_TRAIN_STEPS_PER_S, 0, last, now=160.0) is None
    # Back to an earlier checkpoint (a restart, a roll-back), and the first weights a reader sees: accepted.
    assert implausible_weights(2_000, 0, last, now=101.0) is None
    assert implausible_weights(10**12, 0, None, now=0.0) is None
    # Fields no learner writes.
    assert "negative" in implausible_weights(-1, 0, None, now=0.0)
    assert "no learner trains that fast" in implausible_weights(10**12, 0, last, now=101.0)
    assert "exploration start" in implausible_weights(500, 600, last, now=101.0)
    assert "exploration start" in implausible_weights(500, -1, None, now=0.0)


def test_the_shared_key_is_read_from_the_environment_only_and_never_written(tmp_path):
    config = config_loading.resolve(LearnerConfig, environ={"DQN_SHARED_KEY": KEY})
    assert config.shared_key == KEY
    assert KEY not in repr(config) and "shared_key" not in config_loading.to_dict(config)
    config_loading.write_config(config, str(tmp_path / "config.json"))
    assert KEY not in (tmp_path / "config.json").read_text()
    assert "shared_key" not in json.loads((tmp_path / "config.json").read_text())
    for source in ({"flags": {"shared_key": KEY}}, {"file_values": {"shared_key": KEY}}):
        with pytest.raises(ConfigError, match="DQN_SHARED_KEY only") as refused:
            config_loading.resolve(LocalConfig, environ={}, **source)
        assert KEY not in str(refused.value)
    with pytest.raises(ConfigError, match="at least 16 characters") as short:
        config_loading.resolve(LearnerConfig, environ={"DQN_SHARED_KEY": "short-key"})
    assert "short-key" not in str(short.value)
    assert config_loading.resolve(LearnerConfig, environ={"DQN_SHARED_KEY": ""}).shared_key is None


def test_the_shared_key_can_come_from_a_file_where_compose_and_docker_mount_secrets(tmp_path):
    """DQN_SHARED_KEY_FILE names the file (its trailing newline dropped); a missing file or both variables stop the
    role at start naming the variable, never the key."""
    secret = tmp_path / "dqn_shared_key"
    secret.write_text(KEY + "\n")
    config = config_loading.resolve(LearnerConfig, environ={"DQN_SHARED_KEY_FILE": str(secret)})
    assert config.shared_key == KEY and KEY not in repr(config)
    with pytest.raises(ConfigError, match="DQN_SHARED_KEY_FILE") as missing:
        config_loading.resolve(LearnerConfig, environ={"DQN_SHARED_KEY_FILE": str(tmp_path / "absent")})
    assert "No such file" in str(missing.value)
    with pytest.raises(ConfigError, match="set twice") as both:
        config_loading.resolve(LearnerConfig, environ={"DQN_SHARED_KEY_FILE": str(secret), "DQN_SHARED_KEY": KEY})
    assert KEY not in str(both.value)
    secret.write_text("short\n")
    with pytest.raises(ConfigError, match="at least 16 characters"):
        config_loading.resolve(LearnerConfig, environ={"DQN_SHARED_KEY_FILE": str(secret)})
    # Only secret settings have a file form: any other *_FILE variable is still an unknown one.
    with pytest.raises(ConfigError, match="unknown environment variable DQN_ENV_ID_FILE"):
        config_loading.resolve(LearnerConfig, environ={"DQN_ENV_ID_FILE": str(secret)})


def sampled_batch(items=3, steps=2, envs=4, action=0, step_type=1, discount=1.0):
    """A sampled block-item batch [items, steps, envs] as the learner stages it (keys in its info)."""
    import tensorflow as tf
    from tf_agents.trajectories import trajectory

    def full(value, dtype):
        return tf.fill([items, steps, envs], tf.constant(value, dtype))

    experience = trajectory.Trajectory(
        step_type=full(step_type, tf.int32), observation=tf.zeros([items, steps, envs, 4]),
        action=full(action, tf.int64), policy_info=(), next_step_type=full(1, tf.int32),
        reward=full(1.0, tf.float32), discount=full(discount, tf.float32))
    return experience


def set_item(experience, item, **leaves):
    """The batch with item `item`'s leaves replaced by single values."""
    import tensorflow as tf

    replaced = {}
    for name, value in leaves.items():
        leaf = getattr(experience, name).numpy().copy()
        leaf[item] = value
        replaced[name] = tf.constant(leaf)
    return experience._replace(**replaced)


def test_item_checks_name_each_bad_item_of_a_batch():
    from tf_agents.specs import tensor_spec

    from dqn.replay_layout.item_checks import BAD_ACTION, BAD_DISCOUNT, BAD_STEP_TYPE, describe, item_problems

    action_spec = tensor_spec.BoundedTensorSpec((), np.int64, 0, 1)
    batch = sampled_batch(items=6)
    assert item_problems(batch, action_spec).numpy().tolist() == [0] * 6
    batch = set_item(batch, 1, action=2)
    batch = set_item(batch, 2, step_type=3)
    batch = set_item(batch, 3, discount=np.nan)
    batch = set_item(batch, 4, discount=1.5, action=-1)
    batch = set_item(batch, 5, next_step_type=-1)
    codes = item_problems(batch, action_spec).numpy()
    assert codes.tolist() == [0, BAD_ACTION, BAD_STEP_TYPE, BAD_DISCOUNT, BAD_ACTION | BAD_DISCOUNT, BAD_STEP_TYPE]
    assert describe(codes) == ("5 items: action outside the action spec (2), step type not FIRST, MID or LAST (2), "
                               "discount NaN or outside [0, 1] (2)")
