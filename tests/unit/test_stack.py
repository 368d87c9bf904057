"""The ABI-locked stack imports together at exactly the pinned versions, and Reverb serves on this machine."""

import re
import tomllib
from importlib import metadata
from pathlib import Path

import portpicker

REPO = Path(__file__).resolve().parents[2]


def pyproject_pins() -> dict[str, str]:
    """`name==version` pins of pyproject.toml's runtime dependencies."""
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return dict(re.fullmatch(r"([\w.-]+)==([\w.]+)", d).groups() for d in dependencies)


def test_installed_versions_are_the_pinned_ones():
    pins = pyproject_pins()
    assert {"tensorflow-cpu", "tf-agents", "dm-reverb", "gymnasium", "numpy"} <= set(pins)
    for name, version in pins.items():
        assert metadata.version(name) == version, f"{name}: installed {metadata.version(name)}, pinned {version}"


def test_the_stack_imports_together_and_a_reverb_server_answers_on_a_free_port():
    import numpy as np
    import reverb  # fails with undefined symbols on any TF mismatch
    import tensorflow as tf
    import tf_agents

    assert tf.__version__ == metadata.version("tensorflow-cpu")
    assert tf_agents.__version__ == metadata.version("tf-agents")
    port = portpicker.pick_unused_port()
    server = reverb.Server([reverb.Table.queue("q", 10)], port=port)
    try:
        client = reverb.Client(f"localhost:{port}")
        client.insert([np.arange(3, dtype=np.float32)], priorities={"q": 1.0})
        assert client.server_info(timeout=10)["q"].current_size == 1
        (sample,) = client.sample("q", num_samples=1, emit_timesteps=False)
        np.testing.assert_array_equal(np.asarray(sample.data[0]).reshape(3), np.arange(3, dtype=np.float32))
    finally:
        server.stop()


def test_lock_pins_every_installed_dependency():
    lock = REPO / "requirements.lock"
    pins = dict(line.strip().split("==", 1) for line in lock.read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for name in (*pyproject_pins(), "protobuf", "grpcio"):
        assert metadata.version(name) == pins[name], name
