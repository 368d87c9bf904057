"""Config machinery: precedence, conversion, validation messages that name the field."""

import json
import re
from pathlib import Path

import pytest

from dqn.settings import loading as config_loading
from dqn.settings.config import (
    ALL_CONFIG_CLASSES,
    ActorConfig,
    CommonConfig,
    EvaluatorConfig,
    LearnerConfig,
    LocalConfig,
    ReplayServerConfig,
)
from dqn.settings.loading import ConfigError, resolve

KNOWN = config_loading.known_field_names(ALL_CONFIG_CLASSES)
REPO = Path(__file__).resolve().parents[2]


def test_defaults_are_valid_for_every_role():
    for cls in ALL_CONFIG_CLASSES:
        config_loading.validate_fields(cls())


def test_every_field_is_documented():
    import dataclasses

    for cls in ALL_CONFIG_CLASSES:
        for f in dataclasses.fields(cls):
            assert len(f.metadata.get("doc", "")) > 10, f"{cls.__name__}.{f.name}"


def test_precedence_defaults_file_env_flags():
    config = resolve(LearnerConfig, file_values={"batch_size": 8, "gamma": 0.9},
                     environ={"DQN_BATCH_SIZE": "16", "HOME": "/x"}, flags={"batch_size": "32"})
    assert (config.batch_size, config.gamma) == (32, 0.9)
    config = resolve(LearnerConfig, file_values={"batch_size": 8}, environ={"DQN_BATCH_SIZE": "16"})
    assert config.batch_size == 16


def test_conversions():
    config = resolve(LocalConfig, environ={}, flags={
        "fc_layer_params": "32, 16", "tensorboard": "true", "target_return": "none", "learning_rate": "3e-4"})
    assert config.fc_layer_params == (32, 16)
    assert config.tensorboard is True and config.target_return is None and config.learning_rate == 3e-4


@pytest.mark.parametrize("flags, field, fragment", [
    ({"replay_max_size": "-5"}, "replay_max_size", ">= 1"),
    ({"replay_max_size": "ten"}, "replay_max_size", "expected an integer"),
    ({"gamma": "1.5"}, "gamma", "<= 1"),
    ({"td_loss": "l1"}, "td_loss", "one of huber, mse"),
    ({"replay_min_size": "500", "replay_max_size": "100"}, "replay_min_size", "<= replay_max_size"),
    ({"replay_address": "nohostport"}, "replay_address", "host:port"),
    ({"control_address": "control:port"}, "control_address", "host:port"),
    ({"fc_layer_params": "64,-1"}, "fc_layer_params", ">= 1"),
    ({"initial_priority": "td_error"}, "initial_priority", "needs prioritized_replay true"),
    ({"initial_priority": "td_error", "prioritized_replay": "true", "n_step_update": "3"}, "initial_priority",
     "n_step_update 1"),
    ({"initial_priority": "newest"}, "initial_priority", "one of auto, max, td_error"),
    ({"num_parallel_calls": "3"}, "num_parallel_calls", "must divide batch_size * train_steps_per_call (256)"),
    ({"envs_per_item": "24"}, "envs_per_item", "must divide batch_size * train_steps_per_call (256)"),
    ({"num_parallel_calls": "32"}, "num_parallel_calls", "must divide the items per sampled batch (16 items of 16"),
    ({"lstm_size": "8", "envs_per_item": "4"}, "envs_per_item", "must be 1 (or 0 = auto) with an RNN"),
    ({"replay_min_size": "8"}, "replay_min_size", "must be >= envs_per_item (16)"),
    ({"epsilon_hold_exponent": "1"}, "epsilon_hold_exponent", "must be 0 (one-step random actions) or > 1"),
])
def test_bad_values_name_the_field(flags, field, fragment):
    with pytest.raises(ConfigError) as error:
        resolve(LearnerConfig, environ={}, flags=flags)
    assert error.value.field_name == field
    message = str(error.value)
    assert config_loading.flag_name(field) in message and config_loading.env_name(field) in message
    assert fragment in message


def test_the_control_tables_are_at_the_replay_address_unless_control_address_is_set():
    assert resolve(ActorConfig, environ={}, flags={"replay_address": "replay:8000"}).control_address_resolved() \
        == "replay:8000"
    config = resolve(ActorConfig, environ={"DQN_CONTROL_ADDRESS": "control:9000"}, flags={"replay_address": "r:1"})
    assert config.control_address_resolved() == "control:9000" and config.replay_address == "r:1"
    assert resolve(ActorConfig, environ={}, flags={"control_address": "none"}).control_address is None


def test_unknown_keys_are_errors_but_other_roles_keys_are_accepted():
    # The compose file shares one DQN_* block: an actor must accept the learner's keys...
    config = resolve(ActorConfig, environ={"DQN_BATCH_SIZE": "32", "DQN_NUM_ENVS": "32"}, known_names=KNOWN)
    assert config.num_envs == 32
    # ...but not a key no role knows.
    with pytest.raises(ConfigError, match="DQN_NUM_ENVZ"):
        resolve(ActorConfig, environ={"DQN_NUM_ENVZ": "4"}, known_names=KNOWN)
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        resolve(CommonConfig, environ={}, file_values={"bogus": 1}, known_names=KNOWN)


def test_config_file_round_trip(tmp_path):
    config = resolve(ReplayServerConfig, environ={}, flags={"port": "9000", "fc_layer_params": "8,8"})
    path = tmp_path / "config.json"
    config_loading.write_config(config, str(path))
    data = json.loads(path.read_text())
    assert data["port"] == 9000 and data["fc_layer_params"] == [8, 8]
    again = resolve(ReplayServerConfig, environ={}, file_values=config_loading.read_config_file(str(path)))
    assert again == config


def test_malformed_config_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        config_loading.read_config_file(str(path))


def test_initial_priority_auto_is_the_actors_td_error_where_it_applies():
    from dqn.replay_layout.items import actors_send_priorities
    from dqn.settings.config import CommonConfig

    assert not actors_send_priorities(CommonConfig())  # uniform replay: no priorities at all
    assert actors_send_priorities(CommonConfig(prioritized_replay=True))
    assert not actors_send_priorities(CommonConfig(prioritized_replay=True, initial_priority="max"))
    assert not actors_send_priorities(CommonConfig(prioritized_replay=True, n_step_update=3))  # auto -> max
    assert not actors_send_priorities(CommonConfig(prioritized_replay=True, lstm_size=(8,)))


def test_actor_envs_must_fill_whole_blocks_and_auto_picks_per_env_items_for_an_rnn():
    with pytest.raises(ConfigError, match="must be a multiple of envs_per_item \\(16\\).*--envs-per-item 1") as error:
        resolve(ActorConfig, environ={}, flags={"num_envs": "24"})
    assert error.value.field_name == "num_envs"
    from dqn.replay_layout.items import ItemShape

    def shape(role, **flags):
        return ItemShape.from_config(resolve(role, environ={}, flags=flags))

    assert shape(ActorConfig, num_envs="24", envs_per_item="8").envs_per_item == 8
    assert shape(ActorConfig, num_envs="6", lstm_size="8").envs_per_item == 1
    default = shape(LearnerConfig)
    assert default.envs_per_item == 16 and default.items(100_000) == 6250 and default.items(1000) == 63


def test_learner_threads_auto_is_one_per_op_and_four_inter_op_on_two_cores_tf_default_on_more():
    assert LearnerConfig().tf_threads(cpus=2) == (1, 4)
    assert LearnerConfig().tf_threads(cpus=1) == (1, 4)
    assert LearnerConfig().tf_threads(cpus=8) == (0, 0)  # 0: TF's default, one thread per core
    explicit = LearnerConfig(intra_op_threads=2, inter_op_threads=3)
    assert explicit.tf_threads(cpus=2) == (2, 3) and explicit.tf_threads(cpus=8) == (2, 3)


def test_help_is_one_line_of_what_a_setting_does_not_a_measurement_log():
    """What it does and its unit; reasons for defaults live in docs/defaults.md, figures in docs/performance.md."""
    import dataclasses

    log_words = re.compile(r"bench/|README|\bseeds? [0-9]|[0-9] seeds\b|\bsolved\b|\bsweep|\b[0-9]+/[0-9]+\b"
                           r"|\b[0-9.]+ ?(?:s|ms|x|%|percent)\b|~", re.IGNORECASE)
    for cls in ALL_CONFIG_CLASSES:
        for f in dataclasses.fields(cls):
            doc = f.metadata["doc"]
            assert "\n" not in doc and len(doc) <= 200, f"{f.name}: keep the help to one short line"
            assert not log_words.search(doc), f"{f.name}: {log_words.search(doc).group(0)!r} in its help: {doc}"


def test_generated_help_states_values_env_var_and_default():
    import argparse

    parser = argparse.ArgumentParser()
    config_loading.add_flags(parser, LearnerConfig)
    help_of = {a.dest: a.help for a in parser._actions}
    assert help_of["initial_priority"].endswith("[one of auto, max, td_error; env DQN_INITIAL_PRIORITY; default auto]")
    assert help_of["gamma"].endswith("[number in [0, 1]; env DQN_GAMMA; default 0.99]")
    assert help_of["gradient_clipping"].endswith("[number > 0, or none; env DQN_GRADIENT_CLIPPING; default 10.0]")
    assert "[comma-separated integers >= 1; env DQN_FC_LAYER_PARAMS; default 256,256]" in help_of["fc_layer_params"]


def test_every_command_prints_its_help_with_the_settings_text_as_written():
    import argparse

    from launcher.cli import _parser

    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        assert "--help" in sub.format_help() or "-h" in sub.format_help(), name
    assert "it warns from 80% of the limit" in " ".join(commands.choices["local"].format_help().split())


def run_cli(*args, env=None):
    """`python -m launcher ARGS` with only the given DQN_* variables set."""
    import os
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.startswith("DQN_")}
    return subprocess.run([sys.executable, "-m", "launcher", *args], capture_output=True, text=True, timeout=120,
                          env={**clean, **(env or {})}, cwd=REPO)


def test_config_markdown_prints_the_reference_and_json_the_resolved_settings(tmp_path):
    from launcher.config_reference import markdown

    printed = run_cli("config", "--markdown")
    assert printed.returncode == 0 and printed.stdout == markdown(), printed.stderr
    (tmp_path / "c.json").write_text('{"gamma": 0.5}')
    resolved = run_cli("config", "--json", "learner", "--config", str(tmp_path / "c.json"),
                       env={"DQN_BATCH_SIZE": "32"})
    assert resolved.returncode == 0, resolved.stderr
    settings = json.loads(resolved.stdout)
    assert (settings["gamma"], settings["batch_size"], settings["fc_layer_params"]) == (0.5, 32, [256, 256])
    bad = run_cli("config", "--json", "learner", env={"DQN_BATCH_SIZEE": "32"})
    assert bad.returncode == 2 and "DQN_BATCH_SIZEE" in bad.stderr


def test_reference_lists_every_setting_once_with_its_roles_and_each_roles_default():
    import dataclasses

    from launcher.config_reference import markdown

    text = markdown()
    for name in KNOWN:
        rows = [line for line in text.splitlines() if line.startswith(f"| `{config_loading.flag_name(name)}` |")]
        assert len(rows) == 1, name
    # local picks its replay server's health port and leaves the other roles' off: it has no health settings.
    assert {f.name for f in dataclasses.fields(LocalConfig)} == KNOWN - {"health_port", "health_host",
                                                                         "health_stall_timeout_s"}
    health = next(line for line in text.splitlines() if line.startswith("| `--health-port` |"))
    assert "| `0` |" in health and "| replay-server, learner, actor, evaluator |" in health
    batch = next(line for line in text.splitlines() if line.startswith("| `--batch-size` |"))
    assert "| learner, local |" in batch and "| `0` |" in batch and "0 = auto: 256" in batch


def test_batch_size_auto_is_256_transitions_or_sequences_of_about_as_many_steps_with_an_rnn():
    assert LearnerConfig().train_batch_size() == 256  # feed-forward: unchanged
    assert LearnerConfig(lstm_size=(32,)).train_batch_size() == 32  # 32 sequences of 8 steps
    assert LearnerConfig(lstm_size=(32,), train_sequence_length=10).train_batch_size() == 25
    assert LearnerConfig(lstm_size=(32,), batch_size=64).train_batch_size() == 64  # an explicit value wins
    assert LearnerConfig(batch_size=64).train_batch_size() == 64
    resolved = resolve(LearnerConfig, environ={}, flags={"lstm_size": "32"})
    resolved.check()
    assert resolved.train_batch_size() == 32 and resolved.parallel_calls() == 2


def test_health_port_is_one_setting_of_the_standalone_roles_and_local_takes_the_shared_variable_without_using_it():
    import dataclasses

    for cls in (ReplayServerConfig, LearnerConfig, ActorConfig, EvaluatorConfig):
        assert resolve(cls, environ={"DQN_HEALTH_PORT": "8001"}).health_port == 8001
        assert cls().health_port == 0
    local = resolve(LocalConfig, environ={"DQN_HEALTH_PORT": "8001"}, known_names=KNOWN)  # compose's shared block
    assert not hasattr(local, "health_port")
    assert len({f.metadata["doc"] for cls in ALL_CONFIG_CLASSES for f in dataclasses.fields(cls)
                if f.name == "health_port"}) == 1
