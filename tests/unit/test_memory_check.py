"""The replay's memory check: cgroup limits read from fake cgroup trees, the estimate, refuse and warn."""

import numpy as np
import pytest
from tf_agents.specs import array_spec

from dqn.process.cgroup import memory_limit
from dqn.settings import loading as config_loading
from dqn.settings.config import ReplayServerConfig
from replay_server.memory_check import GIB, ReplayTooLarge, bytes_per_transition, check_replay_memory

CARTPOLE = array_spec.ArraySpec((4,), np.float32)
ATARI = array_spec.ArraySpec((84, 84, 4), np.uint8)


def fake_cgroups(tmp_path, proc_lines: str, limits: dict[str, str], v2: bool):
    """A /proc/self/cgroup and a cgroup mount with `limits` (path under the mount -> file content)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc").write_text(proc_lines)
    root = tmp_path / "cgroup"
    root.mkdir()
    if v2:
        (root / "cgroup.controllers").write_text("cpu memory pids\n")
    for path, content in limits.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    return str(tmp_path / "proc"), str(root)


def test_v2_the_tightest_limit_of_the_cgroup_and_its_ancestors(tmp_path):
    proc, root = fake_cgroups(tmp_path, "0::/kubepods/pod1/box\n", {
        "kubepods/pod1/box/memory.max": "max\n", "kubepods/pod1/memory.max": "2147483648\n",
        "kubepods/memory.max": "8589934592\n"}, v2=True)
    assert memory_limit(proc, root) == (2 * GIB, f"{root}/kubepods/pod1/memory.max")


def test_v2_inside_a_container_namespace_and_without_any_limit(tmp_path):
    proc, root = fake_cgroups(tmp_path, "0::/\n", {"memory.max": "1610612736\n"}, v2=True)
    assert memory_limit(proc, root) == (1536 * 2**20, f"{root}/memory.max")
    proc, root = fake_cgroups(tmp_path / "none", "0::/user.slice\n", {"user.slice/memory.max": "max\n"}, v2=True)
    assert memory_limit(proc, root) is None


def test_v1_the_container_mount_when_the_host_path_is_not_under_it(tmp_path):
    proc, root = fake_cgroups(tmp_path, "12:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n",
                              {"memory/memory.limit_in_bytes": "2147483648\n"}, v2=False)
    assert memory_limit(proc, root) == (2 * GIB, f"{root}/memory/memory.limit_in_bytes")
    proc, root = fake_cgroups(tmp_path / "free", "4:memory:/\n",
                              {"memory/memory.limit_in_bytes": "9223372036854771712\n"}, v2=False)
    assert memory_limit(proc, root) is None  # v1's "no limit"
    assert memory_limit(str(tmp_path / "missing"), root) is None  # not Linux


def test_the_estimate_counts_reverb_per_item_and_per_step_and_images_compressed():
    assert bytes_per_transition(CARTPOLE, 16) == pytest.approx(100 + 2400 / 16 + 16)
    assert bytes_per_transition(CARTPOLE, 1) == pytest.approx(100 + 2400 + 16)
    # An Atari frame stack at the measured ratio; a bool grid (not an image of uint8) at its raw size.
    assert 2_000 < bytes_per_transition(ATARI, 16) < 2_800
    assert bytes_per_transition(array_spec.ArraySpec((10, 10, 4), np.bool_), 16) == pytest.approx(250 + 400)


def breakout(**settings) -> ReplayServerConfig:
    return config_loading.resolve(ReplayServerConfig, flags={"preset": "breakout", **settings}, environ={})


def test_the_atari_recipe_is_refused_in_the_shipped_2_gib_limit_with_the_figure_and_the_fix():
    with pytest.raises(ReplayTooLarge) as refused:
        check_replay_memory(breakout(), ATARI, (2 * GIB, "/sys/fs/cgroup/memory.max"))
    message = str(refused.value)
    assert refused.value.exit_code == 2
    assert "replay_max_size 1,000,000 transitions" in message
    assert "its memory limit is 2.0 GiB (/sys/fs/cgroup/memory.max)" in message
    assert "lower --replay-max-size / DQN_REPLAY_MAX_SIZE to " in message and "raise the memory limit to" in message
    fitting = int(message.split("DQN_REPLAY_MAX_SIZE to ")[1].split(" ")[0].replace(",", ""))
    assert 400_000 < fitting < 600_000
    assert check_replay_memory(breakout(replay_max_size=fitting), ATARI, (2 * GIB, "x")) is None


def test_warn_mode_a_tight_fit_and_no_limit_start_with_a_line_or_silently():
    assert "starting anyway" in check_replay_memory(breakout(replay_memory_check="warn"), ATARI, (2 * GIB, "x"))
    assert "over 80% of it" in check_replay_memory(breakout(), ATARI, (int(3.4 * GIB), "x"))
    assert check_replay_memory(breakout(), ATARI, (8 * GIB, "x")) is None
    assert check_replay_memory(breakout(), ATARI, None) is None
    assert check_replay_memory(breakout(replay_memory_check="off"), ATARI, (GIB, "x")) is None
