"""The ABI-locked stack imports together at exactly the pinned versions."""

from importlib import metadata


def test_pinned_versions_import_together():
    import gymnasium
    import numpy
    import reverb  # fails with undefined symbols on any TF mismatch
    import tensorflow as tf
    import tf_agents

    assert tf.__version__ == "2.15.1"
    assert tf_agents.__version__ == "0.19.0"
    assert metadata.version("dm-reverb") == "0.14.0"
    assert int(numpy.__version__.split(".")[0]) < 2
    assert gymnasium.__version__.startswith("1.")
    assert reverb.Server is not None


def test_lock_pins_every_installed_dependency():
    from pathlib import Path

    lock = Path(__file__).resolve().parents[2] / "requirements.lock"
    pins = dict(line.strip().split("==", 1) for line in lock.read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for name in ("tensorflow-cpu", "tf-agents", "dm-reverb", "gymnasium", "grpcio", "numpy", "protobuf"):
        assert metadata.version(name) == pins[name], name
