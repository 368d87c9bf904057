"""The deployment sections of README.md name only things that exist, with the values the files have."""

from __future__ import annotations

import re
import shlex

import pytest

from dqn import config_loading
from dqn.config import ALL_CONFIG_CLASSES
from tests.deploy.manifests import REPO, config_env, one, parse_duration_s, pod_templates, role_of

DOC = REPO / "README.md"
KINDS = {"deployment": "Deployment", "statefulset": "StatefulSet", "svc": "Service", "service": "Service",
         "hpa": "HorizontalPodAutoscaler"}


def doc() -> str:
    """The docs text."""
    return DOC.read_text()


def commands(prefix: str) -> list[list[str]]:
    """Shell commands in the docs' code blocks that start with `prefix`, split into words (comments dropped)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", doc(), re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:len(prefix.split())] == prefix.split():
                found.append(words)
    return found


def test_paths_in_the_docs_exist():
    """Every repository path the docs mention exists."""
    paths = set(re.findall(r"(?<![\w/.-])((?:deploy|tests)/[\w./-]*\w|docker-compose\.yml)", doc()))
    assert {"deploy/Dockerfile", "deploy/compose.gpu.yml", "deploy/k8s/overlays/dev"} <= paths
    for path in paths:
        assert (REPO / path).exists(), f"the docs mention {path}, which does not exist"


def test_compose_commands_name_real_services_and_files(compose):
    """Services in `docker compose` commands and `-f` files exist; scale and exec targets are real."""
    services = set(compose["services"])
    found = commands("docker compose")
    assert len(found) >= 6
    for words in found:
        rest = words[2:]
        while rest[0] == "-f":  # compose's own options come before the subcommand
            assert (REPO / rest[1]).is_file(), words
            rest = rest[2:]
        subcommand, args = rest[0], rest[1:]
        for i, word in enumerate(args):
            if word == "--scale":
                assert args[i + 1].split("=")[0] in services, words
        targets = [a for a in args if not a.startswith("-")]
        if subcommand in ("logs", "exec", "cp", "run", "stop", "start", "restart") and targets:
            assert targets[0].split(":")[0] in services, f"{' '.join(words)}: no such service"


def test_compose_facts_match_the_file(compose):
    """TensorBoard address, volume names and mount points, grace periods, volume prefix, image user."""
    text = doc()
    binding = compose["services"]["tensorboard"]["ports"][0].rsplit(":", 1)[0]
    assert f"http://{binding}" in text
    assert f"`{compose['name']}_`" in text and f"{compose['name']}_replay-checkpoints" in text
    for volume in compose["volumes"]:
        mounts = {v.split(":")[1] for s in compose["services"].values() for v in s.get("volumes", [])
                  if v.startswith(f"{volume}:")}
        assert re.search(rf"\| `{volume}` \| `{mounts.pop()}`", text), f"volume {volume} row"
    assert f"user\n{compose['services']['learner']['user'].split(':')[0]}" in text.replace("user ", "user\n")
    grace = {n: parse_duration_s(s["stop_grace_period"]) for n, s in compose["services"].items()}
    assert f"replay server {grace['replay-server'] / 60:.0f} min, learner {grace['learner'] / 60:.0f} min" in text
    assert f"actor` ({compose['services']['actor']['deploy']['replicas']} replicas)" in text


def test_dqn_settings_in_the_docs_are_real_fields(rendered):
    """Every DQN_* name the docs use is a config field; the dev overlay's values are the ones rendered."""
    known = config_loading.known_field_names(ALL_CONFIG_CLASSES)
    for name in set(re.findall(r"DQN_[A-Z0-9_]+", doc())):
        assert name.removeprefix("DQN_").lower() in known, f"{name} is not a setting"
    dev = config_env(rendered["dev"])
    dev_row = next(line for line in doc().splitlines() if line.startswith("| `deploy/k8s/overlays/dev`"))
    for name, value in re.findall(r"(DQN_[A-Z0-9_]+)=(\w+)", dev_row):
        assert dev[name] == value, name


def test_kubectl_commands_name_real_objects(rendered):
    """Namespaces, overlays and objects in `kubectl` commands exist in the rendered manifests."""
    namespaces = {next(o for o in objs if o["kind"] == "Namespace")["metadata"]["name"]: name
                  for name, objs in rendered.items()}
    found = commands("kubectl")
    assert len(found) >= 8
    for words in found:
        if "-k" in words:
            target = words[words.index("-k") + 1]
            assert target.removeprefix("deploy/k8s/").replace("overlays/", "") in rendered, target
        if "-n" not in words:
            continue
        objects = rendered[namespaces[words[words.index("-n") + 1]]]
        for word in words:
            kind, _, name = word.partition("/")
            if kind in KINDS and name:
                one(objects, KINDS[kind], name)
            if word.startswith("app.kubernetes.io/component="):
                assert any(t["metadata"]["labels"].get("app.kubernetes.io/component") == word.split("=")[1]
                           for _, t in pod_templates(objects))


@pytest.mark.parametrize("overlay", ["base"])
def test_kubernetes_facts_match_the_manifests(rendered, overlay):
    """Grace periods, the replay claim name, the autoscaler range, the health port the docs state."""
    objects = rendered[overlay]
    text = doc()
    grace = {role_of(t["spec"]["containers"][0]): t["spec"]["terminationGracePeriodSeconds"]
             for _, t in pod_templates(objects)}
    assert (f"`terminationGracePeriodSeconds` is {grace['replay-server']} s for the replay server (final checkpoint), "
            f"{grace['learner']} s for") in " ".join(text.split())
    assert f"{grace['actor']} s for actors" in " ".join(text.split()) and grace["actor"] == grace["evaluator"]
    replay = one(objects, "StatefulSet", "replay-server")
    claim = f"{replay['spec']['volumeClaimTemplates'][0]['metadata']['name']}-{replay['metadata']['name']}-0"
    assert f"`{claim}`" in text
    hpa = one(objects, "HorizontalPodAutoscaler", "actor")["spec"]
    utilization = hpa["metrics"][0]["resource"]["target"]["averageUtilization"]
    assert f"({hpa['minReplicas']}–{hpa['maxReplicas']} replicas at {utilization} % CPU" in text
    assert f"health port {config_env(objects)['DQN_HEALTH_PORT']}" in text
