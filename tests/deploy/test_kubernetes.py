"""Offline checks of deploy/k8s: every overlay renders and validates; the S2 security rules hold in each."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from dqn.settings import loading as config_loading
from dqn.settings.config import ALL_CONFIG_CLASSES, ActorConfig, EvaluatorConfig, LearnerConfig, ReplayServerConfig
from dqn.settings.identity import stable_actor_id
from tests.deploy.manifests import (
    OVERLAYS,
    ROLES,
    component,
    config_env,
    container_env,
    load_compose,
    one,
    pod_templates,
    role_of,
    tool,
)

ROLE_CONFIGS = {"replay-server": ReplayServerConfig, "learner": LearnerConfig, "actor": ActorConfig,
                "evaluator": EvaluatorConfig}
CLIENT_ROLES = {"learner", "actor", "evaluator"}


def validate(path) -> subprocess.CompletedProcess:
    """kubernetes-validate --strict (offline schemas shipped with the package)."""
    return subprocess.run([tool("kubernetes-validate"), "--strict", "--quiet", str(path)], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_renders_and_passes_kubernetes_validate(rendered, overlay, tmp_path):
    """`kubectl kustomize` output is valid against the Kubernetes schemas, unknown fields rejected."""
    path = tmp_path / f"{overlay}.yaml"
    path.write_text(yaml.safe_dump_all(rendered[overlay]))
    result = validate(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_validation_rejects_a_broken_manifest(rendered, tmp_path):
    """The validator is real: an unknown field and a wrong type fail."""
    objects = [dict(o) for o in yaml.safe_load_all(yaml.safe_dump_all(rendered["base"]))]
    learner = one(objects, "Deployment", "learner")
    learner["spec"]["replicas"] = "one"
    learner["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFs"] = True
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    assert validate(path).returncode != 0


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_topology_objects_exist(rendered, overlay):
    """Namespace, ConfigMap, replay StatefulSet + headless Service + PVC, learner, actors, evaluator, TensorBoard."""
    objects = rendered[overlay]
    namespaces = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]
    assert len(namespaces) == 1
    assert all(o["metadata"].get("namespace") == namespaces[0] for o in objects if o["kind"] != "Namespace")
    replay = one(objects, "StatefulSet", "replay-server")
    service = one(objects, "Service", "replay-server")
    assert service["spec"]["clusterIP"] == "None" and replay["spec"]["serviceName"] == service["metadata"]["name"]
    assert replay["spec"]["replicas"] == 1
    claims = {t["metadata"]["name"] for t in replay["spec"]["volumeClaimTemplates"]}
    replay_container = replay["spec"]["template"]["spec"]["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in replay_container["volumeMounts"]}
    # The checkpoints live in a folder of their own on the claim: a volume's root may hold lost+found.
    assert container_env(objects, replay_container)["DQN_CHECKPOINT_DIR"] == mounts[claims.pop()] + "/checkpoints"
    learner = one(objects, "Deployment", "learner")
    assert learner["spec"]["replicas"] == 1 and learner["spec"]["strategy"]["type"] == "Recreate"
    learner_spec = learner["spec"]["template"]["spec"]
    run_root = next(m for m in learner_spec["containers"][0]["volumeMounts"]
                    if m["mountPath"] == config_env(objects)["DQN_ROOT_DIR"])
    volume = next(v for v in learner_spec["volumes"] if v["name"] == run_root["name"])
    assert "persistentVolumeClaim" in volume, "the learner's run root (checkpoints) must be persistent"
    one(objects, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    actor = one(objects, "StatefulSet", "actor")  # stable pod names actor-<ordinal>: the actor ids
    assert actor["spec"]["replicas"] >= 1 and actor["spec"]["podManagementPolicy"] == "Parallel"
    actor_service = one(objects, "Service", "actor")
    assert actor_service["spec"]["clusterIP"] == "None" and actor["spec"]["serviceName"] == \
        actor_service["metadata"]["name"]
    assert not actor["spec"].get("volumeClaimTemplates"), "actors keep no state of their own"
    one(objects, "Deployment", "evaluator")
    one(objects, "Deployment", "tensorboard")
    assert one(objects, "Service", "tensorboard")["spec"]["type"] == "ClusterIP"
    assert all(o["spec"].get("type", "ClusterIP") == "ClusterIP" for o in objects if o["kind"] == "Service"), \
        "no NodePort/LoadBalancer: nothing is exposed outside the cluster"


def test_base_has_an_actor_autoscaler(rendered):
    """The example HPA scales the actor StatefulSet (and only it)."""
    hpa = one(rendered["base"], "HorizontalPodAutoscaler", "actor")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("StatefulSet", one(rendered["base"], "StatefulSet", "actor")
                                                ["metadata"]["name"])
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_pods_are_hardened(rendered, overlay):
    """Non-root, seccomp RuntimeDefault, read-only root fs, no privilege escalation, all capabilities dropped."""
    for workload, template in pod_templates(rendered[overlay]):
        name = workload["metadata"]["name"]
        spec = template["spec"]
        pod_security = spec["securityContext"]
        assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] > 0, name
        assert pod_security["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec["enableServiceLinks"] is False, f"{name}: injected *_PORT variables could collide with DQN_*"
        assert spec["automountServiceAccountToken"] is False, name
        assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), name
        assert not any("hostPath" in v for v in spec.get("volumes", [])), name
        for container in spec["containers"] + spec.get("initContainers", []):
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"]["drop"] == ["ALL"] and not security["capabilities"].get("add"), name
            assert not security.get("privileged") and security.get("runAsUser", 1) != 0, name
            assert container["resources"]["limits"]["memory"], name
            assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"]), f"{name}: writable /tmp"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_namespace_enforces_restricted_pod_security(rendered, overlay):
    """The namespace enforces the restricted Pod Security Standard, so the API server rejects a weaker pod."""
    namespace = next(o for o in rendered[overlay] if o["kind"] == "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_roles_have_grpc_probes_and_grace_periods(rendered, overlay):
    """gRPC startup/readiness/liveness probes on the health port; grace periods for a clean stop."""
    objects = rendered[overlay]
    seen = set()
    for _, template in pod_templates(objects):
        spec = template["spec"]
        grace = spec["terminationGracePeriodSeconds"]
        for container in spec["containers"]:
            role = role_of(container)
            if role not in ROLES:
                assert container["readinessProbe"] and container["livenessProbe"], role
                continue
            seen.add(role)
            port = int(container_env(objects, container)["DQN_HEALTH_PORT"])
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert container[probe]["grpc"]["port"] == port, f"{role} {probe}"
            assert grace >= {"replay-server": 60, "learner": 30}.get(role, 10), f"{role}: grace {grace}"
    assert seen == set(ROLES)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_no_learner_or_evaluator_in_the_replay_pod(rendered, overlay):
    """One role per pod: Reverb's in-process shortcut segfaults across PID namespaces sharing localhost."""
    for workload, template in pod_templates(rendered[overlay]):
        containers = template["spec"]["containers"] + template["spec"].get("initContainers", [])
        roles = [role_of(c) for c in containers]
        assert len(roles) == 1, f"{workload['metadata']['name']} runs {roles}"
        assert template["spec"].get("shareProcessNamespace") is not True
        assert component(template) == roles[0], "pod labels must name the role (NetworkPolicy selects by them)"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_network_policy_default_deny_and_replay_port_only_for_our_roles(rendered, overlay):
    """Default deny in and out; only learner/actor/evaluator pods reach the replay port, and only that port."""
    objects = rendered[overlay]
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    deny = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert len(deny) == 1 and set(deny[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert not deny[0]["spec"].get("ingress") and not deny[0]["spec"].get("egress")
    labels = {component(t): t["metadata"]["labels"] for _, t in pod_templates(objects)}
    replay_port = int(config_env(objects)["DQN_PORT"])

    def selects(selector: dict, pod_labels: dict) -> bool:
        if selector == {}:
            return True
        if any(pod_labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
            return False
        for expr in selector.get("matchExpressions", []):
            present = expr["key"] in pod_labels
            value = pod_labels.get(expr["key"])
            ok = {"In": present and value in expr.get("values", []),
                  "NotIn": not present or value not in expr.get("values", []),
                  "Exists": present, "DoesNotExist": not present}[expr["operator"]]
            if not ok:
                return False
        return True

    admitted = set()
    for policy in policies:
        if not selects(policy["spec"]["podSelector"], labels["replay-server"]):
            continue
        for rule in policy["spec"].get("ingress", []):
            assert [p["port"] for p in rule["ports"]] == [replay_port], "only the replay port is opened"
            for peer in rule["from"]:
                assert set(peer) == {"podSelector"}, "no ipBlock/namespaceSelector: our namespace's pods only"
                admitted |= {role for role, pod in labels.items() if selects(peer["podSelector"], pod)}
    assert admitted == CLIENT_ROLES
    egress_ok = set()
    for policy in policies:
        for rule in policy["spec"].get("egress", []):
            to_replay = any("podSelector" in peer and "namespaceSelector" not in peer
                            and selects(peer["podSelector"], labels["replay-server"]) for peer in rule.get("to", []))
            if to_replay and replay_port in [p["port"] for p in rule.get("ports", [])]:
                egress_ok |= {role for role, pod in labels.items() if selects(policy["spec"]["podSelector"], pod)}
    assert egress_ok == CLIENT_ROLES, "the roles need egress to the replay port under the default deny"


def test_base_configmap_holds_the_compose_settings(rendered):
    """deploy/k8s/base/dqn.env is the x-dqn-env block of docker-compose.yml, key for key."""
    compose_env = {k: str(v) for k, v in load_compose()["x-dqn-env"].items()}
    assert config_env(rendered["base"]) == compose_env


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_role_gets_a_valid_config(rendered, overlay):
    """Each container's DQN_* environment resolves for its role; actors derive their id from the pod name."""
    objects = rendered[overlay]
    known = config_loading.known_field_names(ALL_CONFIG_CLASSES)
    for workload, template in pod_templates(objects):
        container = template["spec"]["containers"][0]
        role = role_of(container)
        if role not in ROLE_CONFIGS:
            continue
        env = container_env(objects, container)
        config = config_loading.resolve(ROLE_CONFIGS[role], environ=env, flags={}, known_names=known)
        service = one(objects, "Service", "replay-server")
        assert config.replay_address == f"{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
        if role == "actor":
            assert config.actor_id == -1
            assert workload["kind"] == "StatefulSet"  # -1 means the ordinal in the pod name
            assert stable_actor_id(f"{workload['metadata']['name']}-3") == 3


def test_gpu_overlay_puts_only_the_learner_on_a_gpu(rendered):
    """The gpu overlay: learner with the GPU image and nvidia.com/gpu; every other container unchanged."""
    for _, template in pod_templates(rendered["gpu"]):
        container = template["spec"]["containers"][0]
        gpus = container["resources"]["limits"].get("nvidia.com/gpu")
        if role_of(container) == "learner":
            assert gpus == 1 and container["image"].startswith("dqn-service-gpu:")
            assert any(t["key"] == "nvidia.com/gpu" for t in template["spec"]["tolerations"])
        else:
            assert gpus is None and container["image"].startswith("dqn-service:")


def test_dev_overlay_is_small_and_single_node(rendered):
    """dev: its own namespace, no autoscaler, a ReadWriteOnce run root, a shorter training budget."""
    objects = rendered["dev"]
    assert not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    assert one(objects, "PersistentVolumeClaim", "run-root")["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert int(config_env(objects)["DQN_MAX_TRAIN_STEPS"]) < int(config_env(rendered["base"])["DQN_MAX_TRAIN_STEPS"])
    assert next(o for o in objects if o["kind"] == "Namespace")["metadata"]["name"] != "dqn"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_roles_that_sign_or_check_control_items_take_the_shared_key_from_an_optional_secret(rendered, overlay):
    """Learner, actors and evaluator get DQN_SHARED_KEY from Secret dqn-shared-key when it exists (optional: the
    run is unsigned without it); no other container gets it, and it is never in the ConfigMap."""
    objects = rendered[overlay]
    assert "DQN_SHARED_KEY" not in config_env(objects)
    keyed = set()
    for _, template in pod_templates(objects):
        container = template["spec"]["containers"][0]
        refs = [e["valueFrom"]["secretKeyRef"] for e in container.get("env", [])
                if e["name"] == "DQN_SHARED_KEY" and "valueFrom" in e]
        if refs:
            assert refs == [{"name": "dqn-shared-key", "key": "key", "optional": True}]
            keyed.add(role_of(container))
    assert keyed == {"learner", "actor", "evaluator"}
    assert config_loading.env_name("shared_key") == "DQN_SHARED_KEY"
