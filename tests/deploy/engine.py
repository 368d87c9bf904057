"""A throw-away Docker engine for the live Compose test, started and removed by deploy/engine/setup-docker-engine.sh."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "engine" / "setup-docker-engine.sh"
BASE_SCRIPT = REPO / "tests" / "deploy" / "build-test-base.sh"
#: Fixed paths, so that a run finds and removes what a crashed run left behind.
ROOT = Path("/var/tmp/dqn-compose-live")
BASE_IMAGE = "dqn-service-test-base:bookworm-python3.11"
COMPOSE_FILES = ("docker-compose.yml", "deploy/compose.signed.yml", "tests/deploy/compose.live.yml")
PROJECT = "dqn-service"
IMAGE = "dqn-service:0.1.0"
#: The user the containers run as (docker-compose.yml `user:`), who must read the shared key's file.
CONTAINER_UID = 10001
#: `docker save` of the service image, keyed by its build inputs: the live compose test writes it after its build,
#: the live swarm test loads it into every node, so one test run builds the image once.
IMAGE_CACHE = Path("/var/cache/dqn-service-test-image")
#: What the image is built from (deploy/Dockerfile's COPY lines, the stand-in base, the build override).
IMAGE_INPUTS = ("deploy/Dockerfile", "pyproject.toml", "README.md", "requirements.lock", "dqn", "actor", "learner",
                "replay_server", "evaluator", "launcher", "tests/deploy/build-test-base.sh",
                "tests/deploy/compose.live.yml")


def image_archive() -> Path:
    """Where the saved image of the current sources lives (it may not exist yet)."""
    digest = hashlib.sha256()
    for name in IMAGE_INPUTS:
        path = REPO / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc" or ".egg-info" in str(file):
                continue
            digest.update(str(file.relative_to(REPO)).encode() + b"\0" + file.read_bytes() + b"\0")
    return IMAGE_CACHE / f"dqn-service-{digest.hexdigest()[:16]}.tar"


class Engine:
    """dockerd on its own socket, data root and exec root; `compose(...)` runs the real file plus the test override."""

    def __init__(self, root: Path = ROOT):
        self.root = root
        self.options = ["--data-root", str(root / "data"), "--exec-root", str(root / "run"),
                        "--socket", str(root / "docker.sock"), "--plugins-dir", str(root / "config" / "cli-plugins"),
                        "--python", sys.executable]
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{root / 'docker.sock'}",
                    "DOCKER_CONFIG": str(root / "config"), "DQN_TEST_BASE_IMAGE": BASE_IMAGE,
                    "COMPOSE_BAKE": "false"}  # no buildx here: build with the engine, without a warning
        self.env.pop("COMPOSE_PROJECT_NAME", None)
        self.env.pop("COMPOSE_FILE", None)

    def script(self, command: str, timeout_s: float = 600) -> None:
        """Runs setup-docker-engine.sh COMMAND with this engine's paths; raises with its output on failure."""
        result = subprocess.run([str(SCRIPT), command, *self.options], capture_output=True, text=True,
                                timeout=timeout_s, env=self.env)
        if result.returncode:
            raise RuntimeError(f"setup-docker-engine.sh {command} failed ({result.returncode}):\n"
                               f"{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        """Removes leftovers of an earlier run, then starts a fresh engine (installs docker.io if missing) and writes
        the shared key deploy/compose.signed.yml mounts as a secret (readable by the containers' user only)."""
        self.script("purge")
        self.script("start")
        key = self.root / "dqn_shared_key"
        key.write_text(secrets.token_hex(32) + "\n")
        os.chown(key, CONTAINER_UID, CONTAINER_UID)
        key.chmod(0o400)
        self.env["SHARED_KEY_PATH"] = str(key)

    def purge(self) -> None:
        """Stops the daemon and removes its mounts, bridges, data root and exec root, then this engine's root."""
        self.script("purge")
        shutil.rmtree(self.root, ignore_errors=True)

    def run(self, *args: str, timeout_s: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        """`docker ARGS` against this engine."""
        result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s, env=self.env,
                                cwd=REPO)
        if check and result.returncode:
            raise AssertionError(f"docker {' '.join(args)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                                 f"{result.stderr[-3000:]}")
        return result

    def compose(self, *args: str, timeout_s: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        """`docker compose -f docker-compose.yml -f deploy/compose.signed.yml -f tests/deploy/compose.live.yml ARGS`."""
        files = [arg for f in COMPOSE_FILES for arg in ("-f", f)]
        return self.run("compose", *files, *args, timeout_s=timeout_s, check=check)

    def build_base(self) -> None:
        """Imports the stand-in base image (debootstrap on the first run, a cached root fs after)."""
        result = subprocess.run([str(BASE_SCRIPT), BASE_IMAGE], capture_output=True, text=True, timeout=900,
                                env=self.env)
        if result.returncode:
            raise AssertionError(f"building the stand-in base image failed:\n{result.stderr[-3000:]}")

    def save_image(self, archive: Path) -> Path:
        """`docker save` of the built service image to `archive`, the `image_archive()` taken before the build (so
        that a source edited during the build cannot give an old image a new key); older archives are removed."""
        IMAGE_CACHE.mkdir(parents=True, exist_ok=True)
        for old in IMAGE_CACHE.glob("*.tar*"):
            if old != archive:
                old.unlink()
        if not archive.exists():
            self.run("save", "-o", f"{archive}.part", IMAGE, timeout_s=600)
            os.replace(f"{archive}.part", archive)
        return archive

    def containers(self) -> list[dict]:
        """`compose ps -a` as dicts (Service, Name, State, Health, ExitCode, ...)."""
        out = self.compose("ps", "-a", "--format", "json").stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def inspect(self, name: str) -> dict:
        """`docker inspect NAME`."""
        return json.loads(self.run("inspect", name).stdout)[0]

    def snapshot(self) -> dict:
        """Progress files and the replay table's insert count, read inside the learner (over the replay network)."""
        result = self.compose("exec", "-T", "learner", "python", "-c", SNAPSHOT, timeout_s=60)
        return json.loads(result.stdout.strip().splitlines()[-1])

    def run_root(self) -> Path:
        """Where the engine keeps the run-root volume (/data/run in the containers) on this host."""
        return Path(json.loads(self.run("volume", "inspect", f"{PROJECT}_run-root").stdout)[0]["Mountpoint"])

    def progress(self) -> dict[str, dict]:
        """Every role's progress.json in the run-root volume, read from the host (no exec: quick while polling)."""
        found = {}
        for path in self.run_root().glob("*/progress.json"):
            try:
                found[path.parent.name] = json.loads(path.read_text())
            except (OSError, ValueError):  # replaced while read: the next poll sees it
                pass
        return found

    def wait_healthy(self, services: dict[str, int], timeout_s: float) -> list[dict]:
        """Waits until exactly these many containers per service run and report healthy."""
        deadline = time.monotonic() + timeout_s
        while True:
            running = [c for c in self.containers() if c["State"] == "running"]
            counts = {s: sum(c["Service"] == s and c["Health"] == "healthy" for c in running) for s in services}
            present = {s: sum(c["Service"] == s for c in running) for s in services}
            if counts == services and present == services:
                return running
            if time.monotonic() > deadline:
                raise AssertionError(f"not healthy within {timeout_s:.0f} s: want {services}, healthy {counts}: "
                                     + "; ".join(f"{c['Name']} {c['State']} {c['Health']}" for c in self.containers()))
            time.sleep(2)


#: Runs inside the learner container: every role's progress.json, the evaluator's result count, the table's inserts.
SNAPSHOT = """
import glob, json, os, reverb
out = {"progress": {}, "evals": 0, "inserts": None}
for path in glob.glob("/data/run/*/progress.json"):
    try:
        out["progress"][os.path.basename(os.path.dirname(path))] = json.load(open(path))
    except (OSError, ValueError):
        pass
if os.path.exists("/data/run/evaluator/evals.jsonl"):
    out["evals"] = sum(1 for line in open("/data/run/evaluator/evals.jsonl") if line.strip())
try:
    info = reverb.Client("replay-server:8000").server_info(timeout=5)["replay"]
    out["inserts"] = info.rate_limiter_info.insert_stats.completed
    out["size"] = info.current_size
except Exception as error:
    out["error"] = repr(error)
print(json.dumps(out))
"""


def wait_for(predicate, timeout_s: float, what: str, interval_s: float = 2.0):
    """Polls `predicate` until it returns a truthy value (returned); fails naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except (AssertionError, ValueError, KeyError, OSError, subprocess.TimeoutExpired) as error:
            last_error = error
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last error: {last_error})")


def built_image_archive() -> Path:
    """The saved service image of the current sources: the live compose test's, or built now in a throw-away engine."""
    archive = image_archive()
    if archive.exists():
        return archive
    engine = Engine()
    engine.env["DQN_TEST_TENSORBOARD_PORT"] = "6006"  # compose.live.yml requires one; nothing is published here
    try:
        engine.start()
        engine.build_base()
        engine.compose("build", "replay-server", timeout_s=900)
        return engine.save_image(archive)
    finally:
        engine.purge()
