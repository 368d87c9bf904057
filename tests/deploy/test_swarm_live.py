"""docker-compose.yml on a real three-node Docker Swarm: deploy, placement, scaling with stable ids, node failures.

Needs root (one dockerd per node, each in its own network namespace; tests/deploy/swarm.py) and fails, never skips,
without it. The service image is the one the live compose test built (`docker save`, loaded on every node); run
alone, this test builds it first. `docker stack deploy` reads docker-compose.yml plus deploy/swarm.yml (what swarm
needs) plus deploy/compose.signed.yml (the shared key as a Swarm secret) plus tests/deploy/swarm.live.yml (small
budgets, quick checkpoints, Ape-X epsilons).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request

import pytest

from tests.deploy.engine import SNAPSHOT, built_image_archive, wait_for
from tests.deploy.swarm import STACK, Node, Swarm

pytestmark = [pytest.mark.swarm_live, pytest.mark.timeout(1200)]

HEALTHY_S = 300      # deploy -> every task healthy (TensorFlow imports of ten roles on two shared cores)
RESCHEDULE_S = 180   # node down -> its actors healthy elsewhere (down detection ~15 s, then a start)
ROLES = {"replay-server": 1, "learner": 1, "actor": 2, "evaluator": 1, "tensorboard": 1}
STATE_ROLES = ("replay-server", "learner", "evaluator", "tensorboard")


@pytest.fixture(scope="module")
def swarm():
    """Three namespaced engines joined into a swarm, the image loaded on each; all of it gone afterwards."""
    assert os.geteuid() == 0, "the live swarm test starts dockerd in network namespaces and needs root"
    timings: dict[str, float] = {}
    started = time.monotonic()
    archive = built_image_archive()
    timings["image"] = time.monotonic() - started
    cluster = Swarm()
    cluster.timings = timings
    try:
        started = time.monotonic()
        cluster.create()
        cluster.init()
        timings["nodes"] = time.monotonic() - started
        started = time.monotonic()
        cluster.load_image(archive)
        timings["load"] = time.monotonic() - started
        yield cluster
    finally:
        started = time.monotonic()
        cluster.close()
        timings["teardown"] = time.monotonic() - started
        print(f"\nlive swarm timings (s): {json.dumps({k: round(v, 1) for k, v in timings.items()})}")
        assert not cluster.leftovers(), cluster.leftovers()


def wait_healthy(swarm: Swarm, services: dict[str, int], timeout_s: float = HEALTHY_S) -> dict[str, list[dict]]:
    """Waits until exactly these many tasks per service run and report healthy; returns them."""
    def healthy():
        tasks = swarm.tasks_of(list(services))
        counts = {name: sum(t["health"] == "healthy" for t in found) for name, found in tasks.items()}
        present = {name: len(found) for name, found in tasks.items()}
        return tasks if counts == services == present else None
    return wait_for(healthy, timeout_s, f"healthy tasks {services}", interval_s=3)


def actor_dirs(swarm: Swarm) -> dict[str, set[int]]:
    """Node -> the actor ids with a directory in that node's run-root volume."""
    found = {}
    for node in swarm.nodes:
        root = node.volume_dir(f"{STACK}_run-root")
        found[node.name] = {int(p.name.split("-")[1]) for p in root.glob("actor-*")} if root.exists() else set()
    return found


def actor_progress(node: Node, actor_id: int) -> dict:
    """progress.json of actor-<id> in the run-root volume of the node it runs on."""
    path = node.volume_dir(f"{STACK}_run-root") / f"actor-{actor_id}" / "progress.json"
    return json.loads(path.read_text()) if path.exists() else {}


def actors_write_from_their_nodes(swarm: Swarm, window_s: float = 8) -> dict[int, float]:
    """Every running actor task (id = slot) advances its items in its own node's volume within `window_s`; returns
    id -> epsilon. The files are read every half second, so the check ends as soon as the last actor has written
    instead of always waiting out the window."""
    by_name = {node.name: node for node in swarm.nodes}
    tasks = swarm.tasks("actor")
    before = {t["slot"]: actor_progress(by_name[t["node"]], t["slot"]).get("items", -1) for t in tasks}
    deadline = time.monotonic() + window_s
    while True:
        time.sleep(0.5)
        after = {t["slot"]: actor_progress(by_name[t["node"]], t["slot"]) for t in tasks}
        stalled = {slot: (before[slot], p.get("items")) for slot, p in after.items()
                   if p.get("items", -1) <= before[slot]}
        if not stalled or time.monotonic() >= deadline:
            break
    assert not stalled, f"actors not writing from their nodes (slot: items before, after): {stalled}"
    return {slot: p["epsilon"] for slot, p in after.items()}


def snapshot(swarm: Swarm) -> dict:
    """Progress files and the replay table's counters, read inside the learner container (on the replay network)."""
    learner = swarm.tasks("learner")[0]
    result = swarm.state.docker("exec", learner["container"], "python", "-c", SNAPSHOT, timeout_s=60)
    return json.loads(result.stdout.strip().splitlines()[-1])


def train_step(swarm: Swarm) -> int:
    """The learner's train step from its progress file on the state node."""
    path = swarm.state.volume_dir(f"{STACK}_run-root") / "learner" / "progress.json"
    return json.loads(path.read_text()).get("train_step", -1) if path.exists() else -1


def advancing(swarm: Swarm, timeout_s: float = 120) -> int:
    """Waits for the train step to advance; returns the new one."""
    first = train_step(swarm)
    return wait_for(lambda: train_step(swarm) > first and train_step(swarm), timeout_s, "the train step to advance")


def container_log(node: Node, container: str) -> str:
    """A container's output (stdout and stderr) from its node."""
    result = node.docker("logs", container, timeout_s=60)
    return result.stdout + result.stderr


def learner_checkpoints(swarm: Swarm) -> set[int]:
    """Train steps of the learner checkpoints in the run-root volume on the state node."""
    directory = swarm.state.volume_dir(f"{STACK}_run-root") / "learner" / "checkpoints"
    return {int(p.name[len("ckpt-"):-len(".index")]) for p in directory.glob("ckpt-*.index")}


def test_swarm_stack_live(swarm):
    timings = swarm.timings
    state, worker = swarm.state, swarm.nodes[2]

    # deploy: every role healthy; the state roles on the labelled node, actors spread over nodes; ids = slots
    started = time.monotonic()
    swarm.deploy()
    tasks = wait_healthy(swarm, ROLES)
    timings["healthy"] = time.monotonic() - started
    for role in STATE_ROLES:
        assert [t["node"] for t in tasks[role]] == [state.name], (role, tasks[role])
    assert len({t["node"] for t in tasks["actor"]}) == 2, tasks["actor"]
    assert sorted(t["slot"] for t in tasks["actor"]) == [1, 2]
    advancing(swarm, 240)
    timings["training"] = time.monotonic() - started
    wait_for(lambda: actors_write_from_their_nodes(swarm), 90, "both actors writing")
    with urllib.request.urlopen(f"http://{state.address}:6006/", timeout=10) as response:  # host-mode port
        assert response.status == 200

    # scale to 6: six distinct ids = slots, each writing from its node into actor-<slot>, six distinct epsilons
    started = time.monotonic()
    swarm.manager.docker("service", "scale", "--detach", f"{STACK}_actor=6")
    tasks = wait_healthy(swarm, {**ROLES, "actor": 6})
    assert sorted(t["slot"] for t in tasks["actor"]) == [1, 2, 3, 4, 5, 6]
    assert len({t["node"] for t in tasks["actor"]}) == 3, tasks["actor"]
    epsilons = wait_for(lambda: actors_write_from_their_nodes(swarm), 90, "six actors writing")
    assert len(set(epsilons.values())) == 6, epsilons
    for t in tasks["actor"]:
        assert t["slot"] in actor_dirs(swarm)[t["node"]], (t, actor_dirs(swarm))
    advancing(swarm)
    timings["scale6"] = time.monotonic() - started

    # the bottleneck verdict of six actors on three nodes, as `dqn-service status` reads it from the replay server
    def verdict() -> str:
        learner = swarm.tasks("learner")[0]
        out = swarm.state.docker("exec", learner["container"], "dqn-service", "status", "--replay-address",
                                 "replay-server:8000", timeout_s=60, check=False).stdout
        return "bottleneck (last" in out and "warming up" not in out and out
    status = wait_for(verdict, 120, "a bottleneck verdict in dqn-service status")
    print("\n" + status)
    # deploy/compose.signed.yml is layered on: the key reaches every role as a Swarm secret and weights carry it
    assert "(signed with a shared key)" in status, status

    # scale down to 4 and up to 6: the ids stay within 1..6 and come back; no directory for a new id anywhere
    started = time.monotonic()
    swarm.manager.docker("service", "scale", "--detach", f"{STACK}_actor=4")
    down = wait_healthy(swarm, {**ROLES, "actor": 4})["actor"]
    assert {t["slot"] for t in down} < {1, 2, 3, 4, 5, 6}, down
    swarm.manager.docker("service", "scale", "--detach", f"{STACK}_actor=6")
    up = wait_healthy(swarm, {**ROLES, "actor": 6})["actor"]
    assert sorted(t["slot"] for t in up) == [1, 2, 3, 4, 5, 6], up
    assert set().union(*actor_dirs(swarm).values()) == {1, 2, 3, 4, 5, 6}, actor_dirs(swarm)
    timings["scale_down_up"] = time.monotonic() - started

    # a worker dies hard: its actors come back on the other nodes with the same ids; training never stops; the
    # replay server and the learner are untouched (same containers, counters still growing)
    replay_before, learner_before = swarm.tasks("replay-server")[0], swarm.tasks("learner")[0]
    before = snapshot(swarm)
    lost = sorted(t["slot"] for t in swarm.tasks("actor") if t["node"] == worker.name)
    assert lost, "the worker must hold actors before it dies"
    step = train_step(swarm)
    worker.power_off()
    killed = time.monotonic()
    wait_for(lambda: swarm.node_status()[worker.name] == "Down", 60, f"{worker.name} to be seen down")
    timings["worker_seen_down"] = time.monotonic() - killed
    moved = wait_healthy(swarm, {**ROLES, "actor": 6}, RESCHEDULE_S)["actor"]
    timings["worker_rescheduled"] = time.monotonic() - killed
    assert worker.name not in {t["node"] for t in moved}
    assert sorted(t["slot"] for t in moved) == [1, 2, 3, 4, 5, 6], moved
    wait_for(lambda: actors_write_from_their_nodes(swarm), 90, "the moved actors writing")
    assert train_step(swarm) > step
    after = snapshot(swarm)
    assert after["inserts"] > before["inserts"] and after["size"] >= before["size"], (before, after)
    assert swarm.tasks("replay-server")[0]["container"] == replay_before["container"]
    assert swarm.tasks("learner")[0]["container"] == learner_before["container"]

    # the node with the state dies hard and comes back: replay server and learner resume from their checkpoints
    wait_for(lambda: learner_checkpoints(swarm), 60, "a learner checkpoint")
    replay_dir = state.volume_dir(f"{STACK}_replay-checkpoints")
    wait_for(lambda: list(replay_dir.glob("*/DONE")), 60, "a replay checkpoint")
    checkpoints = learner_checkpoints(swarm)
    state.power_off()
    killed = time.monotonic()
    wait_for(lambda: swarm.node_status()[state.name] == "Down", 60, f"{state.name} to be seen down")
    time.sleep(10)  # the pinned roles have nowhere else to go: they must not start on another node
    for role in ("replay-server", "learner"):
        assert not swarm.tasks(role), (role, swarm.tasks(role))
    state.script("start")
    restarted = time.monotonic()
    wait_healthy(swarm, {"replay-server": 1, "learner": 1, "evaluator": 1, "tensorboard": 1})
    timings["state_node_back"] = time.monotonic() - restarted
    resumed = advancing(swarm, 180)
    timings["state_node_training"] = time.monotonic() - killed
    replay_log = container_log(state, swarm.tasks("replay-server")[0]["container"])
    restored = re.findall(r"restored replay: size=(\d+)/", replay_log)
    assert restored and int(restored[-1]) > 0, replay_log[-2000:]
    learner_log = container_log(state, swarm.tasks("learner")[0]["container"])
    start_step = [int(n) for n in re.findall(r"learner starting at train step (\d+)", learner_log)]
    assert start_step and start_step[-1] >= max(checkpoints) > 0, (start_step, checkpoints, learner_log[-2000:])
    assert resumed > start_step[-1]
    wait_healthy(swarm, {**ROLES, "actor": 6})
    wait_for(lambda: actors_write_from_their_nodes(swarm), 90, "all actors writing after the state node's return")
