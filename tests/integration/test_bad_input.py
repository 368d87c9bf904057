"""Bad input exits 2 with a one-line reason naming the problem, before anything starts."""

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("args, env, fragment", [
    (["--env-id", "NoSuchEnv-v0"], {}, "unknown gymnasium env id 'NoSuchEnv-v0'"),
    (["--env-id", "Pendulum-v1"], {}, "DQN needs Discrete, MultiDiscrete or a Tuple of Discrete actions"),
    (["--replay-max-size", "-10"], {}, "--replay-max-size / DQN_REPLAY_MAX_SIZE: must be >= 1; got -10"),
    ([], {"DQN_REPLAY_MAX_SIZE": "lots"}, "DQN_REPLAY_MAX_SIZE: expected an integer, got 'lots'"),
    ([], {"DQN_NOT_A_SETTING": "1"}, "unknown environment variable DQN_NOT_A_SETTING"),
])
def test_B1_bad_config_exits_2_with_reason(tmp_path, args, env, fragment):
    result = run_cli("replay-server", "--root-dir", str(tmp_path), "--port", "1", "--health-port", "0", *args, env=env)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert not (tmp_path / "replay_checkpoints").exists()  # nothing started


def test_B1_unknown_flag_exits_2(tmp_path):
    result = run_cli("replay-server", "--root-dir", str(tmp_path), "--no-such-flag", "3")
    assert result.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in result.stderr


def test_B1_malformed_config_file_exits_2(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"replay_max_size": 10,')
    result = run_cli("replay-server", "--config", str(bad))
    assert result.returncode == 2 and "is not valid JSON" in result.stderr
