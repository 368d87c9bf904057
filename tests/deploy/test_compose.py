"""Offline checks of docker-compose.yml (and the GPU override): schema, topology and the S1 security rules."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from dqn.settings import loading as config_loading
from dqn.settings.config import ALL_CONFIG_CLASSES, ActorConfig, EvaluatorConfig, LearnerConfig, ReplayServerConfig
from dqn.settings.identity import replica_number
from tests.deploy.manifests import (
    COMPOSE_FILE,
    DOCKERFILE,
    GPU_OVERRIDE,
    ROLES,
    SIGNED_OVERRIDE,
    load_compose,
    parse_duration_s,
    project_name,
    tool,
)

SERVICES = {*ROLES, "tensorboard"}
ROLE_CONFIGS = {"replay-server": ReplayServerConfig, "learner": LearnerConfig, "actor": ActorConfig,
                "evaluator": EvaluatorConfig}
#: seconds a final replay checkpoint may take (Reverb blocks while writing; 100k CartPole transitions take
#: a few seconds, a slow disk or a bigger env far more) -> the replay server's stop grace period must allow it.
REPLAY_CHECKPOINT_BUDGET_S = 60


def check_schema(*paths: Path) -> subprocess.CompletedProcess:
    """check-jsonschema against the vendored compose-spec schema (offline)."""
    return subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


def test_compose_files_pass_the_compose_spec_schema():
    """docker-compose.yml, deploy/compose.gpu.yml and deploy/compose.signed.yml are valid compose-spec documents."""
    result = check_schema(COMPOSE_FILE, GPU_OVERRIDE, SIGNED_OVERRIDE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_rejects_a_broken_file(tmp_path):
    """The schema check is real: a misspelt key and a bad type make it fail."""
    broken = load_compose()
    broken["services"]["actor"]["deploy"]["replicas"] = "two"
    broken["services"]["learner"]["helthcheck"] = broken["services"]["learner"].pop("healthcheck")
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    assert check_schema(path).returncode != 0


def test_topology_one_image_roles_as_commands(compose):
    """Five services, one image, the role is the command; actors are scalable (2 replicas, no fixed names)."""
    services = compose["services"]
    assert set(services) == SERVICES
    images = {service["image"] for service in services.values()}
    assert images == {"dqn-service:0.1.0"}
    for name, service in services.items():
        assert service["build"] == {"context": ".", "dockerfile": "deploy/Dockerfile"}, name
        assert "container_name" not in service, f"{name}: container_name prevents --scale"
        if name in ROLES:
            assert service["command"] == [name]
            assert "entrypoint" not in service, f"{name} must use the image's dqn-service entrypoint"
    assert services["actor"]["deploy"]["replicas"] == 2
    assert services["tensorboard"]["entrypoint"] == ["tensorboard"]


def test_replay_port_never_published_and_tensorboard_on_loopback(compose):
    """Only TensorBoard publishes a port, on 127.0.0.1 only; the roles live on an internal network."""
    services = compose["services"]
    networks = compose["networks"]
    for name, service in services.items():
        assert "network_mode" not in service, f"{name}: network_mode bypasses the network isolation"
        published = service.get("ports", [])
        if name != "tensorboard":
            assert not published, f"{name} publishes {published}"
            assert all(networks[net].get("internal") is True for net in service["networks"]), name
    ports = services["tensorboard"]["ports"]
    assert ports == ["127.0.0.1:6006:6006"]
    assert all("8000" not in str(port) for service in services.values() for port in service.get("ports", []))
    assert "replay" not in services["tensorboard"]["networks"], "TensorBoard needs no access to the replay port"
    assert set(services["replay-server"]["networks"]) == {"replay"}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_containers_are_hardened(compose, name):
    """Non-root user, read-only root fs with a /tmp tmpfs, no capabilities, no-new-privileges, memory limit."""
    service = compose["services"][name]
    user = str(service["user"]).split(":")
    assert user[0].isdigit() and int(user[0]) != 0 and (len(user) == 1 or int(user[1]) != 0), service["user"]
    assert service["read_only"] is True
    assert any(str(entry).split(":")[0] == "/tmp" for entry in service["tmpfs"])
    assert service["cap_drop"] == ["ALL"] and not service.get("cap_add")
    assert any(opt.replace("=", ":") in ("no-new-privileges:true", "no-new-privileges")
               for opt in service["security_opt"])
    assert not service.get("privileged") and "pid" not in service and "ipc" not in service
    memory = service.get("mem_limit") or service["deploy"]["resources"]["limits"]["memory"]
    assert memory, f"{name} has no memory limit"
    assert all(not str(v).startswith("/") for v in service.get("volumes", [])), f"{name}: no host bind mounts"


def test_compose_user_matches_the_image_user(compose):
    """The compose user is the one the Dockerfile creates and owns /data for."""
    text = DOCKERFILE.read_text()
    uid = next(line.split("=")[1] for line in text.splitlines() if line.startswith("ARG UID="))
    gid = next(line.split("=")[1] for line in text.splitlines() if line.startswith("ARG GID="))
    assert {str(s["user"]) for s in compose["services"].values()} == {f"{uid}:{gid}"}


def test_stop_grace_periods_cover_a_clean_stop(compose):
    """Every service has a stop grace period; the replay server's is long enough for a final checkpoint."""
    services = compose["services"]
    for name, service in services.items():
        assert parse_duration_s(service["stop_grace_period"]) >= 10, name
    assert parse_duration_s(services["replay-server"]["stop_grace_period"]) >= REPLAY_CHECKPOINT_BUDGET_S
    assert parse_duration_s(services["learner"]["stop_grace_period"]) >= 30  # learner checkpoint + final publish


@pytest.mark.parametrize("name", ROLES)
def test_roles_have_grpc_healthchecks(compose, name):
    """Each role's healthcheck is `dqn-service probe` on the health port the shared env gives it."""
    service = compose["services"][name]
    port = service["environment"]["DQN_HEALTH_PORT"]
    assert service["healthcheck"]["test"] == ["CMD", "dqn-service", "probe", f"localhost:{port}"]
    assert parse_duration_s(service["healthcheck"]["start_period"]) >= 60  # TensorFlow import on a slow box
    if name != "replay-server":
        # a plain list: `docker stack deploy` refuses conditions (roles wait for the replay server themselves)
        assert service["depends_on"] == ["replay-server"]


def test_volumes_hold_the_run_root_and_replay_checkpoints(compose):
    """Named volumes: the run root for every role, replay checkpoints for the replay server only."""
    services = compose["services"]
    assert set(compose["volumes"]) == {"run-root", "replay-checkpoints"}
    replay_env = services["replay-server"]["environment"]
    assert f"replay-checkpoints:{replay_env['DQN_CHECKPOINT_DIR']}" in services["replay-server"]["volumes"]
    for name in ROLES:
        assert f"run-root:{services[name]['environment']['DQN_ROOT_DIR']}" in services[name]["volumes"], name
    assert services["tensorboard"]["volumes"] == ["run-root:/data/run:ro"]
    assert "--logdir" in services["tensorboard"]["command"]
    logdir = services["tensorboard"]["command"][services["tensorboard"]["command"].index("--logdir") + 1]
    assert logdir == compose["x-dqn-env"]["DQN_ROOT_DIR"]
    assert not any("replay-checkpoints" in str(v) for n in ROLES if n != "replay-server"
                   for v in services[n]["volumes"])


@pytest.mark.parametrize("name", ROLES)
def test_shared_env_block_is_a_valid_config_for_every_role(compose, name):
    """Each role gets the whole x-dqn-env block (plus its own extras) and it resolves without errors."""
    shared = compose["x-dqn-env"]
    env = {k: str(v) for k, v in compose["services"][name]["environment"].items()}
    assert {k: str(v) for k, v in shared.items()} == {k: env[k] for k in shared}
    assert all(k.startswith("DQN_") for k in env)
    config = config_loading.resolve(ROLE_CONFIGS[name], environ=env, flags={},
                                    known_names=config_loading.known_field_names(ALL_CONFIG_CLASSES))
    host, port = config.replay_address.rsplit(":", 1)
    assert host == "replay-server" and port == shared["DQN_PORT"], "the replay address must be the service's port"
    assert config.root_dir == shared["DQN_ROOT_DIR"]


def test_actor_replicas_derive_distinct_ids(compose):
    """Scaled actors share one config: DQN_ACTOR_ID=-1 makes each use its replica number (<project>-actor-<n>).

    The live test (test_compose_live.py) checks in a real engine that Docker's DNS gives each replica that name.
    """
    assert compose["services"]["actor"]["environment"]["DQN_ACTOR_ID"] == "-1"
    assert "DQN_ACTOR_ID" not in compose["x-dqn-env"]
    assert "container_name" not in compose["services"]["actor"], "a fixed name would forbid --scale"
    project = project_name()
    assert project == "dqn-service"
    assert replica_number(f"{project}-actor-3.{project}_replay") == 3


def test_gpu_override_changes_only_the_learner(compose):
    """deploy/compose.gpu.yml: the learner gets its own GPU image and one NVIDIA device, nothing else changes."""
    override = load_compose(GPU_OVERRIDE)
    assert set(override) == {"services"} and set(override["services"]) == {"learner"}
    learner = override["services"]["learner"]
    assert learner["image"] != compose["services"]["learner"]["image"]
    assert learner["build"]["args"]["TF_VARIANT"] == "gpu"
    assert "ARG TF_VARIANT=cpu" in DOCKERFILE.read_text()
    devices = learner["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    forbidden = {"ports", "user", "read_only", "cap_drop", "security_opt", "networks", "privileged", "cap_add"}
    assert not forbidden & set(learner), "the override must not weaken the base hardening"


def test_signed_override_gives_the_readers_and_writers_of_control_items_the_key_from_a_secret(compose, tmp_path):
    """deploy/compose.signed.yml: learner, actors and evaluator read the shared key from a secret file, whose path
    resolves to the key (the variable's name is the one the settings read), and nothing else changes."""
    override = load_compose(SIGNED_OVERRIDE)
    assert set(override["services"]) == {"learner", "actor", "evaluator"}
    assert override["secrets"]["dqn_shared_key"]["file"] == "${SHARED_KEY_PATH:-./dqn_shared_key}"
    assert "dqn_shared_key" in (COMPOSE_FILE.parent / ".gitignore").read_text().splitlines()
    key_file = tmp_path / "dqn_shared_key"
    key_file.write_text("0123456789abcdef0123456789abcdef\n")
    known = config_loading.known_field_names(ALL_CONFIG_CLASSES)
    for name, service in override["services"].items():
        assert set(service) == {"environment", "secrets"} and service["secrets"] == ["dqn_shared_key"]
        mounted = service["environment"]["DQN_SHARED_KEY_FILE"]
        assert mounted == "/run/secrets/dqn_shared_key"  # where Compose and Swarm mount secret `dqn_shared_key`
        env = {**{k: str(v) for k, v in compose["services"][name]["environment"].items()},
               "DQN_SHARED_KEY_FILE": str(key_file)}
        config = config_loading.resolve(ROLE_CONFIGS[name], environ=env, flags={}, known_names=known)
        assert config.shared_key == "0123456789abcdef0123456789abcdef"
