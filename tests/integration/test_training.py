"""Real processes with tiny budgets: actors insert, the learner trains and publishes, the evaluator reports."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
import reverb

from dqn.process.progress import read_progress
from dqn.remote.weights_puller import fetch_weights
from dqn.replay_layout.items import REPLAY_TABLE
from dqn.resolve import resolve_settings
from dqn.settings.config import LearnerConfig
from tests.conftest import REPO, free_port, health_status, run_cli, wait_until
from tests.events import read_scalars
from tests.helpers import FAST, LEARNER_FAST

pytestmark = pytest.mark.integration



def start_roles(spawn, server, root, num_actors=2, learner=True, learner_flags=()):
    """Learner, actors and evaluator against `server`, each with small budgets and 1 s summaries."""
    common = ["--root-dir", str(root), "--replay-address", server.address, *FAST]
    roles = {}
    if learner:
        roles["learner"] = spawn("learner", *common, *LEARNER_FAST, "--max-train-steps", "100000",
                                 "--publish-interval", "25", "--summary-interval", "25",
                                 "--checkpoint-interval", "100000", *learner_flags, name="learner")
    for i in range(num_actors):
        # actor-1 runs the TF-Agents policy in a graph call, actor-0 its numpy mirror (the default for an MLP).
        inference = ("--inference", "graph") if i == 1 else ()
        roles[f"actor-{i}"] = spawn("actor", *common, "--actor-id", str(i), "--num-envs", "4", "--warmup-steps", "200",
                                    "--summary-interval-s", "1", "--weights-refresh-interval", "40", *inference,
                                    name=f"actor-{i}")
    roles["evaluator"] = spawn("evaluator", *common, "--eval-interval", "50", "--eval-episodes", "3",
                               "--poll-interval-s", "0.5", name="evaluator")
    return roles


def progress(root, name):
    return read_progress(str(root / name))


def test_actors_insert_learner_trains_publishes_evaluator_reports(spawn, replay_server_factory, tmp_path):
    server = replay_server_factory(*FAST)
    root = tmp_path / "run"
    roles = start_roles(spawn, server, root, learner_flags=("--export-interval", "40"))

    wait_until(lambda: all(progress(root, f"actor-{i}").get("items", 0) > 100 for i in range(2)), 120,
               "both actors to insert items")
    wait_until(lambda: progress(root, "learner").get("train_step", 0) >= 100, 120, "the learner to train 100 steps")
    # Periodic greedy-policy exports (steps 40 and 80, through one reused PolicySaver) load and act.
    wait_until(lambda: roles["learner"].log().count("exported greedy policy") >= 2, 60, "two policy exports")
    import tensorflow as tf
    from tf_agents.trajectories import time_step as ts

    exported = tf.saved_model.load(str(root / "learner" / "policy"))
    observation = tf.constant([[0.01, 0.0, 0.02, 0.0]], tf.float32)
    action = exported.action(ts.restart(observation, batch_size=1), exported.get_initial_state(1)).action.numpy()
    assert action.shape == (1,) and action[0] in (0, 1)
    wait_until(lambda: (root / "evaluator" / "evals.jsonl").exists(), 120, "an evaluation")
    record = json.loads((root / "evaluator" / "evals.jsonl").read_text().splitlines()[0])
    assert record["episodes"] == 3 and record["average_return"] > 0
    assert all(role.alive() for role in roles.values()), {n: r.log()[-2000:] for n, r in roles.items()}
    assert "policy in numpy" in roles["actor-0"].log() and "policy in a graph call" in roles["actor-1"].log()

    # Stop the learner: it checkpoints and publishes its final weights; actors must pick exactly those up.
    assert roles["learner"].terminate() == 0
    final_step = progress(root, "learner")["train_step"]
    assert progress(root, "learner").get("done") is True
    for i in range(2):
        wait_until(lambda i=i: progress(root, f"actor-{i}").get("weights_train_step") == final_step, 60,
                   f"actor-{i} to use the final weights of step {final_step}")
    published = fetch_weights(server.address, 30.0)
    assert published is not None and published.train_step == final_step
    # TensorBoard: the learner's documented scalars, written in one graph call per summary (dqn/process/summaries.py).
    scalars = read_scalars(root / "learner")
    for tag in ("losses/td_loss", "charts/mean_q", "charts/sgd_steps_per_sec", "charts/epsilon_schedule",
                "charts/publish_lag", "replay/size", "replay/inserts_per_sec", "replay/samples_per_insert"):
        assert tag in scalars, sorted(scalars)
    steps = [step for step, _ in scalars["losses/td_loss"]]
    assert steps == sorted(steps) and len(steps) >= 3 and steps[-1] >= 75
    assert all(np.isfinite(value) and value >= 0 for _, value in scalars["losses/td_loss"])
    assert 0 < scalars["replay/size"][-1][1] <= 100_000
    assert all(0.1 <= value <= 1.0 for _, value in scalars["charts/epsilon_schedule"])
    from learner.train import Learner

    restored = Learner(resolve_settings(LearnerConfig(root_dir=str(root), replay_address=server.address,
                                                      fc_layer_params=(32,))))
    assert restored.step == final_step  # the SIGTERM checkpoint holds exactly the final step
    # The published weights are exactly the checkpoint's; the actors hold the item of that train step (above),
    # and the learner published no other after it.
    learner_weights = [v.numpy() for v in restored.bundle.policy_variables]
    assert len(published.variables) == len(learner_weights)
    assert all(np.array_equal(ours, theirs) for ours, theirs in zip(published.variables, learner_weights, strict=True))

    for name in ("actor-0", "actor-1", "evaluator"):
        assert roles[name].terminate() == 0, roles[name].log()[-2000:]
    assert "eval train_step=" in roles["evaluator"].log()
    assert server.process.terminate() == 0


def test_actor_started_before_learner_waits_visibly_then_collects(spawn, replay_server_factory, tmp_path):
    server = replay_server_factory(*FAST)
    root = tmp_path / "run"
    roles = start_roles(spawn, server, root, num_actors=1, learner=False)
    wait_until(lambda: progress(root, "actor-0").get("status", "").startswith("waiting for first weights"), 90,
               "the actor to report that it waits for weights")
    assert "waiting for first weights" in roles["actor-0"].log()
    items_while_waiting = progress(root, "actor-0")["items"]
    time.sleep(2)
    assert progress(root, "actor-0")["items"] == items_while_waiting  # no collection without weights
    spawn("learner", "--root-dir", str(root), "--replay-address", server.address, *FAST, *LEARNER_FAST,
          "--max-train-steps", "100000", "--publish-interval", "10", name="learner")
    wait_until(lambda: progress(root, "actor-0").get("weights_train_step", -1) >= 0, 120, "first weights")
    wait_until(lambda: progress(root, "actor-0").get("items", 0) > items_while_waiting, 60, "collection to resume")


def test_B2_actor_with_other_env_refuses_to_start(replay_server_factory, tmp_path):
    server = replay_server_factory()
    result = run_cli("actor", "--root-dir", str(tmp_path), "--replay-address", server.address,
                     "--env-id", "MountainCar-v0")
    assert result.returncode == 2
    assert "built for other specs than this actor" in result.stderr
    assert reverb.Client(server.address).server_info(timeout=10)[REPLAY_TABLE].current_size == 0


def test_B3_unreachable_replay_server_is_a_clear_error(tmp_path):
    port = free_port()
    result = run_cli("learner", "--root-dir", str(tmp_path), "--replay-address", f"localhost:{port}",
                     "--connect-timeout-s", "3")
    assert result.returncode == 1
    assert f"cannot reach replay server at localhost:{port}" in result.stderr


def test_status_reports_tables_train_step_and_health(spawn, replay_server_factory, tmp_path):
    server = replay_server_factory(*FAST)
    root = tmp_path / "run"
    health_port = free_port()
    spawn("learner", "--root-dir", str(root), "--replay-address", server.address, *FAST, *LEARNER_FAST, "--health-port",
          str(health_port), "--max-train-steps", "100000", name="learner")
    wait_until(lambda: health_status(health_port) == "SERVING", 90, "learner health")
    result = run_cli("status", "--replay-address", server.address, "--health", f"learner=localhost:{health_port}",
                     "--health", f"replay=localhost:{server.health_port}")
    assert result.returncode == 0, result.stderr
    assert "replay server " + server.address + ": reachable" in result.stdout
    assert "latest published train step: 0" in result.stdout
    assert f"learner          localhost:{health_port}" in result.stdout and "SERVING" in result.stdout
    lines = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    assert lines["variables"][1] == "1"  # one item: the latest weights
    # The run's settings decided once by the replay server (CartPole: fully observed, no images).
    assert ("run settings: env CartPole-v1, seed 0; decided from the env: observation_history 1, image_encoding "
            "scaled, samples_per_insert") in result.stdout
    assert "action_mask none" in result.stdout  # CartPole gives no mask of valid actions


def test_local_stops_every_role_cleanly_when_its_process_group_gets_sigterm(tmp_path):
    """A supervisor's SIGTERM to the whole group also reaches the forkserver the roles were forked from."""
    command = [sys.executable, "-m", "launcher", "local", "--root-dir", str(tmp_path / "run"), *FAST,
               *LEARNER_FAST, "--num-envs", "4", "--max-train-steps", "100000", "--target-return", "1e9"]
    local = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                             start_new_session=True)
    try:
        wait_until(lambda: progress(tmp_path / "run", "learner").get("train_step", 0) > 0, 120, "training to start")
        roles = [p for p in psutil.Process(local.pid).children(recursive=True) if p.name().startswith("dqn-")]
        assert len(roles) == 5, [p.name() for p in roles]
        os.killpg(local.pid, signal.SIGTERM)
        output, _ = local.communicate(timeout=120)
    finally:
        if local.poll() is None:
            local.kill()
    assert local.returncode == 0, output
    assert "exit codes: replay-server=0, learner=0, actor-0=0, actor-1=0, evaluator=0" in output, output
    assert not [p for p in roles if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_local_without_supervision_exits_nonzero_when_a_role_dies(tmp_path):
    command = [sys.executable, "-m", "launcher", "local", "--root-dir", str(tmp_path / "run"), *FAST,
               *LEARNER_FAST, "--num-envs", "4", "--max-train-steps", "100000", "--max-role-restarts", "0",
               # CartPole can be solved within seconds; an unreachable target keeps the run going until the kill.
               "--target-return", "1e9"]
    local = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        def actor_child():
            # Roles are forked from the launcher's forkserver (launcher/forked.py), which names each process.
            for child in psutil.Process(local.pid).children(recursive=True):
                if child.name() == "dqn-actor-0":
                    return child
            return None

        def actors_run_or_launcher_ended() -> bool:
            return local.poll() is not None or (
                actor_child() is not None and (tmp_path / "run" / "actor-0" / "progress.json").exists())

        try:
            wait_until(actors_run_or_launcher_ended, 120, "the local actors to run")
        except AssertionError as error:  # say what the launcher printed, not only that it took long
            local.kill()
            raise AssertionError(f"{error}; the launcher printed:\n{local.communicate()[0]}") from None
        assert local.poll() is None, f"the launcher ended before its actors ran:\n{local.communicate()[0]}"
        victim = actor_child()
        victim.send_signal(signal.SIGKILL)
        output, _ = local.communicate(timeout=120)
    finally:
        if local.poll() is None:
            local.kill()
    assert local.returncode == 1, output
    assert "crashed: actor-" in output and "exited -9" in output
    assert "summary: solved=no" in output
