"""Offline checks of the Docker Swarm override deploy/swarm.yml and of what `docker stack deploy` needs from
docker-compose.yml; tests/deploy/test_swarm_live.py deploys both on a real three-node swarm."""

from __future__ import annotations

from pathlib import Path

import yaml

from dqn.settings.identity import replica_number
from tests.deploy.manifests import COMPOSE_FILE, REPO, ROLES, SWARM_OVERRIDE, load_compose
from tests.deploy.test_compose import check_schema

STATE_SERVICES = {"replay-server", "learner", "evaluator", "tensorboard"}
STATE_LABEL = "node.labels.dqn.state == true"


class _TaggedLoader(yaml.SafeLoader):
    """A YAML loader that reads Compose's `!override`/`!reset` tags as plain values."""


_TaggedLoader.add_multi_constructor("!", lambda loader, _tag, node: loader.construct_sequence(node)
                                    if isinstance(node, yaml.SequenceNode) else loader.construct_mapping(node))


def tagged(path: Path) -> dict:
    """A compose file that may use Compose's merge tags."""
    return yaml.load(path.read_text(), Loader=_TaggedLoader)  # noqa: S506 - a safe loader with two tags added


def test_swarm_override_passes_the_compose_spec_schema():
    """deploy/swarm.yml is a valid compose-spec document (and so is its combination's base)."""
    result = check_schema(SWARM_OVERRIDE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_file_stays_loadable_by_stack_deploy():
    """No top-level `name` and no depends_on conditions: `docker stack deploy` refuses both."""
    compose = load_compose()
    assert "name" not in compose
    assert all(isinstance(s.get("depends_on", []), list) for s in compose["services"].values())
    assert "version" not in compose


def test_state_services_are_pinned_to_the_node_with_their_volumes():
    """Replay server, learner, evaluator and TensorBoard run where the state label is; actors anywhere."""
    services = load_compose(SWARM_OVERRIDE)["services"]
    assert set(services) == {*ROLES, "tensorboard"}
    for name in STATE_SERVICES:
        assert services[name]["deploy"]["placement"]["constraints"] == [STATE_LABEL], name
    assert "placement" not in services["actor"]["deploy"]
    volumes = load_compose()["services"]
    assert any("replay-checkpoints" in str(v) for v in volumes["replay-server"]["volumes"])


def test_actor_hostname_is_its_task_slot():
    """The actor's hostname ends in its task slot, which dqn/settings/identity.py takes as the actor id."""
    hostname = load_compose(SWARM_OVERRIDE)["services"]["actor"]["hostname"]
    assert hostname == "{{.Service.Name}}-{{.Task.Slot}}"
    rendered = hostname.replace("{{.Service.Name}}", "dqn_actor").replace("{{.Task.Slot}}", "5")
    assert replica_number(rendered) == 5
    assert load_compose(COMPOSE_FILE)["services"]["actor"]["environment"]["DQN_ACTOR_ID"] == "-1"


def test_override_adds_no_privileges_and_no_published_replay_port():
    """Only placement, endpoint mode, /tmp, the actor hostname and TensorBoard's port change; nothing is weakened."""
    services = load_compose(SWARM_OVERRIDE)["services"]
    allowed = {"deploy", "volumes", "hostname", "ports"}
    for name, service in services.items():
        assert set(service) <= allowed, f"{name}: {set(service) - allowed}"
        assert service["deploy"]["endpoint_mode"] == "dnsrr", name
        assert service["volumes"] == [{"type": "tmpfs", "target": "/tmp", "tmpfs": {"size": 256 * 1024 * 1024}}]
        if name != "tensorboard":
            assert "ports" not in service, name
    assert services["tensorboard"]["ports"] == [{"target": 6006, "published": 6006, "protocol": "tcp",
                                                 "mode": "host"}]


def test_live_swarm_budgets_equal_the_live_compose_budgets():
    """The live swarm test runs the roles at the live compose test's small budgets."""
    swarm = tagged(REPO / "tests" / "deploy" / "swarm.live.yml")
    compose = tagged(REPO / "tests" / "deploy" / "compose.live.yml")
    assert swarm["x-small"] == compose["x-small"]
    assert set(swarm["services"]) == set(ROLES)


def test_swarm_commands_in_the_docs_name_real_files_and_services():
    """`docker stack deploy -c FILE` files exist and `docker service ...` targets are services of the stack."""
    from tests.deploy.test_docs import all_commands

    services = set(load_compose()["services"])
    deploys = all_commands("docker stack deploy")
    assert deploys, "the docs show no `docker stack deploy` command"
    stacks = set()
    for command in deploys:
        files = [command[i + 1] for i, word in enumerate(command) if word == "-c"]
        assert files[:2] == ["docker-compose.yml", "deploy/swarm.yml"], command
        assert all((REPO / f).is_file() for f in files), command
        stacks.add(command[-1])
    for command in all_commands("docker service"):
        targets = [w.split("=")[0] for w in command[3:] if not w.startswith("-")]
        for target in targets:
            stack, _, service = target.partition("_")
            assert stack in stacks and service in services, f"{' '.join(command)}: no service {target}"


def test_kubernetes_says_what_the_swarm_stack_says(rendered):
    """Both clusters: the replay server keeps its own volume, actors take ids from their replica slot (no fixed
    id), spread over nodes, and the replay service resolves to the task itself (headless / dnsrr)."""
    from tests.deploy.manifests import one

    swarm = load_compose(SWARM_OVERRIDE)["services"]
    compose = load_compose()["services"]
    for overlay, objects in rendered.items():
        replay = one(objects, "StatefulSet", "replay-server")
        assert replay["spec"]["volumeClaimTemplates"], overlay
        assert one(objects, "Service", "replay-server")["spec"]["clusterIP"] == "None", overlay
        actor = one(objects, "StatefulSet", "actor")["spec"]["template"]["spec"]
        env = {e["name"]: e["value"] for e in actor["containers"][0]["env"]}
        assert env["DQN_ACTOR_ID"] == compose["actor"]["environment"]["DQN_ACTOR_ID"] == "-1", overlay
        spread = actor["topologySpreadConstraints"]
        assert [c["topologyKey"] for c in spread] == ["kubernetes.io/hostname"], overlay
        assert spread[0]["whenUnsatisfiable"] == "ScheduleAnyway", "a preference, as swarm's spread"
    assert swarm["replay-server"]["deploy"]["endpoint_mode"] == "dnsrr"
    assert "replay-checkpoints" in str(compose["replay-server"]["volumes"])


def test_the_encrypted_overlay_override_encrypts_the_replay_network_and_changes_nothing_else():
    """deploy/swarm-encrypted.yml: a valid compose-spec document whose only change is `encrypted` on the internal
    `replay` overlay; the docs name it in a `docker stack deploy` line."""
    path = REPO / "deploy" / "swarm-encrypted.yml"
    result = check_schema(path)
    assert result.returncode == 0, result.stdout + result.stderr
    override = load_compose(path)
    assert override == {"networks": {"replay": {"driver": "overlay", "driver_opts": {"encrypted": ""}}}}
    assert load_compose()["networks"]["replay"]["internal"] is True  # the base keeps the network internal
    deploy_doc = (REPO / "docs" / "deploy.md").read_text()
    assert ("docker stack deploy -c docker-compose.yml -c deploy/swarm.yml -c deploy/swarm-encrypted.yml dqn"
            in deploy_doc)
    for port in ("2377/tcp", "7946/tcp", "7946/udp", "4789/udp"):
        assert port in deploy_doc, port
