"""docker-compose.yml in a real Docker engine: build, up, training, scaling, crash recovery, stop/up, down -v.

Needs root (it starts dockerd with deploy/engine/setup-docker-engine.sh, which installs docker.io with apt if it is
missing) and fails, never skips, when the engine cannot start. Layered on the real file: deploy/compose.signed.yml
(the shared key from a secret) and tests/deploy/compose.live.yml (the stand-in base image, host-network builds, a
free TensorBoard port and small budgets).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import subprocess
import time
import urllib.request

import portpicker
import pytest

from tests.deploy.engine import PROJECT, Engine, image_archive, wait_for

pytestmark = [pytest.mark.compose_live, pytest.mark.timeout(900)]

HEALTHY_S = 300        # build done -> every container healthy (TensorFlow imports on two shared cores)
ROLES = {"replay-server": 1, "learner": 1, "actor": 2, "evaluator": 1, "tensorboard": 1}


def bridges() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    names = [line.split(": ")[1].split("@")[0] for line in out.splitlines()]
    return [n for n in names if n == "docker0" or re.fullmatch(r"br-[0-9a-f]{12}", n)]


@pytest.fixture(scope="module")
def engine():
    """A fresh engine for this module; daemon, mounts, bridges and data root are gone afterwards, pass or fail."""
    assert os.geteuid() == 0, "the live Compose test starts dockerd and needs root (CI runs as root)"
    engine = Engine()
    timings = {}
    try:
        started = time.monotonic()
        engine.start()
        timings["engine"] = time.monotonic() - started
        engine.timings = timings
        yield engine
    finally:
        try:
            engine.compose("down", "-v", "--timeout", "5", timeout_s=120, check=False)
        except Exception:  # noqa: BLE001 - the purge below removes what down could not
            pass
        engine.purge()
        leftovers = bridges()
        mounts = [line.split()[1] for line in open("/proc/mounts") if line.split()[1].startswith(str(engine.root))]
        print(f"\nlive compose timings (s): {json.dumps({k: round(v, 1) for k, v in timings.items()})}")
        assert not leftovers and not mounts and not engine.root.exists(), (leftovers, mounts)


def actor_ids(engine: Engine) -> dict[str, int]:
    """Container name -> the actor id it logged at start ("actor <id>: ...")."""
    ids = {}
    for container in engine.containers():
        if container["Service"] == "actor" and container["State"] == "running":
            result = engine.run("logs", container["Name"])  # one call: the role's stdout and stderr
            logs = result.stdout + result.stderr
            found = re.findall(r"\bactor (\d+): \d+ envs of", logs)
            if not found:
                raise AssertionError(f"{container['Name']} has not logged its id yet")
            ids[container["Name"]] = int(found[-1])
    return ids


def actor_ids_of(engine: Engine, count: int) -> dict[str, int] | bool:
    """`actor_ids` once it lists `count` actors, else False (one read of the logs per poll)."""
    ids = actor_ids(engine)
    return len(ids) == count and ids


def actors_writing(engine: Engine, ids: set[int], window_s: float = 10) -> bool:
    """Every actor-<id> in `ids` created more items within the window, and the replay table's inserts grew.

    The window ends as soon as every actor has written: their progress files are read from the host every half
    second (a read inside the learner starts a Python that imports Reverb, seconds on a busy box, so only the two
    reads of the table's inserts go there)."""
    def items(progress: dict, i: int) -> int:
        return progress.get(f"actor-{i}", {}).get("items", 0)

    def grew() -> bool:
        now = engine.progress()
        return all(items(now, i) > items(first["progress"], i) for i in ids)

    first = engine.snapshot()
    deadline = time.monotonic() + window_s
    while not grew():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)
    second = engine.snapshot()
    return second["inserts"] is not None and second["inserts"] > (first["inserts"] or 0)


def train_step(engine: Engine) -> int:
    return engine.progress().get("learner", {}).get("train_step", -1)


def tensorboard_tags(port: int) -> set[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as response:
        runs = json.load(response)
    return {tag for tags in runs.values() for tag in tags}


def logged_steps(engine: Engine, pattern: str) -> list[int]:
    result = engine.compose("logs", "--no-color", "learner")
    return [int(n) for n in re.findall(pattern, result.stdout + result.stderr)]


def test_compose_topology_live(engine, tmp_path):
    timings = engine.timings
    port = portpicker.pick_unused_port()
    engine.env["DQN_TEST_TENSORBOARD_PORT"] = str(port)

    started = time.monotonic()
    engine.build_base()
    timings["base_image"] = time.monotonic() - started
    started = time.monotonic()
    archive = image_archive()  # the sources' key, taken before the build reads them
    # Every service names the same image: building one builds it for all (five parallel builds would only compete).
    build = engine.compose("build", "replay-server", timeout_s=900)
    timings["build"] = time.monotonic() - started
    assert "useradd warning" not in build.stdout + build.stderr
    started = time.monotonic()
    engine.save_image(archive)  # the live swarm test loads this archive on its nodes instead of building again
    timings["save"] = time.monotonic() - started

    # up: every service healthy, training, evaluation, TensorBoard on the published loopback port
    started = time.monotonic()
    engine.compose("up", "-d")
    engine.wait_healthy(ROLES, HEALTHY_S)
    timings["healthy"] = time.monotonic() - started
    first_step = wait_for(lambda: train_step(engine) > 0 and train_step(engine), 240, "the first train steps")
    wait_for(lambda: train_step(engine) > first_step, 120, "the train step to advance")
    timings["training"] = time.monotonic() - started
    evals = engine.run_root() / "evaluator" / "evals.jsonl"
    wait_for(lambda: evals.exists() and evals.read_text().strip(), 180, "the evaluator's first results")
    assert "average_return" in json.loads(evals.read_text().splitlines()[0])
    wait_for(lambda: {"eval/average_return", "losses/td_loss"} <= tensorboard_tags(port), 120,
             "TensorBoard to list eval/average_return and losses/td_loss")
    first_ids = wait_for(lambda: actor_ids(engine), 60, "the actors' ids")
    assert sorted(first_ids.values()) == [1, 2], first_ids  # replica numbers of dqn-service-actor-1 and -2

    # scale to 4: four distinct ids (the replica numbers), each writing into its own summary dir
    started = time.monotonic()
    engine.compose("up", "-d", "--scale", "actor=4")
    engine.wait_healthy({**ROLES, "actor": 4}, HEALTHY_S)
    ids4 = wait_for(lambda: actor_ids_of(engine, 4), 60, "four actor ids")
    assert ids4 == {f"{PROJECT}-actor-{n}": n for n in (1, 2, 3, 4)}, ids4
    wait_for(lambda: actors_writing(engine, set(ids4.values())), 180, "all four actors to write", interval_s=0)
    dirs = {name for name in engine.progress() if name.startswith("actor-")}
    assert dirs == {f"actor-{n}" for n in (1, 2, 3, 4)}, dirs
    timings["scale4"] = time.monotonic() - started

    # the bottleneck verdict, as `dqn-service status` reads it from the replay server inside the project's network
    def verdict() -> str:
        out = engine.compose("exec", "-T", "learner", "dqn-service", "status", "--replay-address",
                             "replay-server:8000", timeout_s=60, check=False).stdout
        return "bottleneck (last" in out and "warming up" not in out and out
    status = wait_for(verdict, 120, "a bottleneck verdict in dqn-service status")
    print("\n" + status)
    # deploy/compose.signed.yml is layered on: weights carry the key's signature, and the actors took them
    assert "(signed with a shared key)" in status, status
    # every container runs on this one machine, and the verdict counts their cores as one machine's
    assert len(re.findall(r"^  machine machine-[0-9a-f]{8}: ", status, re.M)) == 1, status
    assert all(p.get("refused_weights", 0) == 0 for name, p in engine.progress().items() if name.startswith("actor"))

    # scale down to 2 and back up to 3: the ids come from the first four, no new summary dirs
    engine.compose("up", "-d", "--scale", "actor=2")
    engine.wait_healthy(ROLES, HEALTHY_S)
    engine.compose("up", "-d", "--scale", "actor=3")
    engine.wait_healthy({**ROLES, "actor": 3}, HEALTHY_S)
    ids3 = wait_for(lambda: actor_ids_of(engine, 3), 60, "three actor ids")
    assert set(ids3.values()) == {1, 2, 3}, ids3
    assert {n for n in engine.progress() if n.startswith("actor-")} == dirs

    # stop: every role exits 0 (one past its stop_grace_period would be killed: 137), actors within seconds
    started, stop_issued = time.monotonic(), datetime.datetime.now(datetime.UTC)
    engine.compose("stop", timeout_s=300)
    timings["stop"] = time.monotonic() - started
    exits = {c["Name"]: (c["State"], c["ExitCode"]) for c in engine.containers()}
    assert all(state == "exited" and code == 0 for state, code in exits.values()), exits
    for name in exits:  # seconds from `compose stop` to each container's exit (clients get SIGTERM at once)
        finished = engine.inspect(name)["State"]["FinishedAt"]
        finished_at = datetime.datetime.fromisoformat(finished[:26].rstrip("Z") + "+00:00")
        timings[f"stop:{name.removeprefix(PROJECT + '-')}"] = (finished_at - stop_issued).total_seconds()
    stopped_at = logged_steps(engine, r"stopping at train step (\d+)")[-1]

    # down + up (new containers, volumes kept): the same actor ids, the learner resumes at the step it stopped at
    engine.compose("down", timeout_s=300)
    started = time.monotonic()
    engine.compose("up", "-d")
    engine.wait_healthy(ROLES, HEALTHY_S)
    timings["restart"] = time.monotonic() - started
    assert wait_for(lambda: actor_ids(engine), 60, "the actors' ids after down/up") == first_ids
    resumed = wait_for(lambda: logged_steps(engine, r"learner starting at train step (\d+)"), 60,
                       "the learner to log its restored step")
    assert resumed == [stopped_at]

    # a crash of the replay server (SIGKILL from outside, as the OOM killer would): the restart policy brings it
    # back with its buffer restored from its last checkpoint, and training resumes within 45 s
    wait_for(lambda: train_step(engine) > stopped_at, 180, "training after down/up", interval_s=1)
    replay = next(c for c in engine.containers() if c["Service"] == "replay-server")
    before = engine.inspect(replay["Name"])
    step = train_step(engine)
    os.kill(before["State"]["Pid"], signal.SIGKILL)
    killed_at = time.monotonic()
    try:
        wait_for(lambda: train_step(engine) > step + 50, 45, "training to resume within 45 s of the crash",
                 interval_s=0.5)
    except AssertionError as error:
        logs = engine.compose("logs", "--no-color", "--tail", "40", "replay-server", "learner", check=False)
        raise AssertionError(f"{error}\ntrain step {train_step(engine)}, {step} at the crash\n"
                             f"{(logs.stdout + logs.stderr)[-6000:]}") from None
    timings["crash_recovery"] = time.monotonic() - killed_at
    assert engine.inspect(replay["Name"])["RestartCount"] == before["RestartCount"] + 1
    logs = engine.compose("logs", "--no-color", "replay-server")
    restored = re.findall(r"restored replay: size=(\d+)/", logs.stdout + logs.stderr)
    assert len(restored) == 2 and int(restored[-1]) > 0, (logs.stdout + logs.stderr)[-2000:]

    # down -v: nothing of the project is left
    engine.compose("down", "-v", timeout_s=300)
    label = f"label=com.docker.compose.project={PROJECT}"
    for kind in ("container", "network", "volume"):
        left = engine.run(kind, "ls", *(["-a"] if kind == "container" else []), "-q", "--filter", label).stdout
        assert not left.strip(), f"{kind}s left after down -v: {left}"
