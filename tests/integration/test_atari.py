"""Breakout end to end: real ROM, the book's preprocessing, the conv Q-network, real processes, tiny budgets."""

import json

import pytest
import reverb

from dqn.replay_layout.items import REPLAY_TABLE
from tests.conftest import wait_until

pytestmark = pytest.mark.integration

#: The breakout preset with budgets a 2-core box runs in about a minute. Episodes are cut at 100 agent steps so
#: a near-random greedy policy (which may never press FIRE) cannot stall the evaluation.
TINY = ["--preset", "breakout", "--replay-min-size", "100", "--replay-max-size", "2000", "--max-episode-steps", "100",
        "--samples-per-insert", "0", "--fc-layer-params", "64", "--envs-per-item", "2"]


def test_breakout_actor_learner_evaluator(spawn, replay_server_factory, tmp_path):
    root = tmp_path / "run"
    server = replay_server_factory(*TINY, root=root)
    common = ["--root-dir", str(root), "--replay-address", server.address, *TINY]
    roles = {
        "learner": spawn("learner", *common, "--max-train-steps", "100000", "--publish-interval", "20",
                         "--summary-interval", "20", "--checkpoint-interval", "100000", "--export-interval", "0",
                         "--num-parallel-calls", "1", "--prefetch", "1", name="learner"),
        "actor-0": spawn("actor", *common, "--actor-id", "0", "--num-actors", "1", "--num-envs", "2",
                         "--warmup-steps", "100", "--summary-interval-s", "1", "--weights-refresh-interval", "40",
                         name="actor-0"),
        "evaluator": spawn("evaluator", *common, "--eval-interval", "20", "--eval-episodes", "1",
                           "--poll-interval-s", "0.5", name="evaluator"),
    }
    from dqn.process.progress import read_progress

    def progress(name):
        return read_progress(str(root / name))

    evals = root / "evaluator" / "evals.jsonl"
    wait_until(lambda: progress("actor-0").get("items", 0) > 150, 120, "the Breakout actor to insert items")
    wait_until(lambda: progress("learner").get("train_step", 0) >= 40, 120, "the learner to train 40 conv steps")
    wait_until(lambda: evals.exists() and evals.read_text().strip(), 120, "an evaluation of a Breakout episode")
    assert all(role.alive() for role in roles.values()), {n: r.log()[-3000:] for n, r in roles.items()}

    record = json.loads(evals.read_text().splitlines()[0])
    assert record["episodes"] == 1 and record["average_return"] >= 0
    assert 0 < record["metrics"]["average_episode_length"] <= 100  # bounded by --max-episode-steps
    info = reverb.Client(server.address).server_info(timeout=10)[REPLAY_TABLE]
    assert info.current_size > 100
    # Observations travel and are stored as uint8 stacks of 4 preprocessed 84x84 frames.
    assert "uint8" in str(info.signature.observation) and "84, 84, 4" in str(info.signature.observation)
    for name in ("actor-0", "evaluator", "learner"):
        assert roles[name].terminate() == 0, roles[name].log()[-3000:]
    assert server.process.terminate() == 0
