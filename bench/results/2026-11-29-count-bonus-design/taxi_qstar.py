"""Taxi-v4: a run's learned Q-values against Q* from value iteration on Taxi's own transition table.

usage: PYTHONPATH=. python bench/results/2026-11-29-count-bonus-design/taxi_qstar.py RUN_ROOT [WEIGHTS]
WEIGHTS: `last` (default: the learner's newest checkpoint, the run's last weights) or a `best_weights.npz`.
"""

import dataclasses
import json
import sys

import gymnasium as gym
import numpy as np

from dqn.builder import DqnBuilder
from dqn.resolve import run_env_specs
from dqn.settings.config import LearnerConfig

root = sys.argv[1]
weights_path = sys.argv[2] if len(sys.argv) > 2 else "last"
raw = json.load(open(f"{root}/learner/config.json"))
names = {f.name for f in dataclasses.fields(LearnerConfig)}
config = LearnerConfig(**{k: v for k, v in raw.items() if k in names})
builder = DqnBuilder(config, run_env_specs(config))
bundle = builder.agent
if weights_path == "last":
    import tensorflow as tf

    weights_path = tf.train.latest_checkpoint(f"{root}/learner/checkpoints")
    tf.train.Checkpoint(agent=bundle.agent).restore(weights_path).expect_partial()
else:
    with np.load(weights_path) as saved:
        variables = [saved[f"variable_{i}"] for i in range(int(saved["count"]))]
    for variable, value in zip(bundle.policy_variables, variables, strict=True):
        variable.assign(value)
q, _ = bundle.q_network(np.arange(500, dtype=np.int64), training=False)
q = np.asarray(q)

# Value iteration: truncation at 200 steps is not terminal (the service bootstraps through it).
P = gym.make("Taxi-v4").unwrapped.P
gamma = config.gamma
qstar = np.zeros((500, 6))
for _ in range(2000):
    v = qstar.max(1)
    new = np.zeros_like(qstar)
    for s in range(500):
        for a in range(6):
            for prob, s2, r, done in P[s][a]:
                new[s, a] += prob * (r + (0.0 if done else gamma * v[s2]))
    if np.abs(new - qstar).max() < 1e-9:
        break
    qstar = new
noop = np.array([[all(s2 == s for _, s2, _, _ in P[s][a]) for a in range(6)] for s in range(500)])
# States a start can reach: passenger not in the taxi and not at its destination are the reset states.
env = gym.make("Taxi-v4").unwrapped
starts = sorted({env.reset(seed=i)[0] for i in range(3000)})
reachable = np.zeros(500, bool)
frontier = list(starts)
reachable[starts] = True
while frontier:
    s = frontier.pop()
    for a in range(6):
        for _, s2, _, done in P[s][a]:
            if not reachable[s2] and not done:
                reachable[s2] = True
                frontier.append(s2)
greedy = q.argmax(1)
optimal = qstar >= qstar.max(1, keepdims=True) - 1e-6
rows = np.flatnonzero(reachable)
gap = np.sort(qstar, 1)[:, -1] - np.sort(qstar, 1)[:, -2]
print(json.dumps({
    "weights": weights_path,
    "reachable_states": int(reachable.sum()),
    "greedy_optimal_share": round(float(optimal[rows, greedy[rows]].mean()), 3),
    "greedy_noop_share": round(float(noop[rows, greedy[rows]].mean()), 3),
    "start_states_greedy_noop_share": round(float(noop[starts, greedy[starts]].mean()), 3),
    "v_star_mean": round(float(qstar[rows].max(1).mean()), 2),
    "v_learned_mean": round(float(q[rows].max(1).mean()), 2),
    "q_error_mean_abs": round(float(np.abs(q[rows] - qstar[rows]).mean()), 2),
    "q_error_at_greedy_mean": round(float((q[rows, greedy[rows]] - qstar[rows, greedy[rows]]).mean()), 2),
    "q_star_gap_median": round(float(np.median(gap[rows])), 2),
    "learned_spread_median": round(float(np.median(q[rows].max(1) - q[rows].min(1))), 2),
}))
