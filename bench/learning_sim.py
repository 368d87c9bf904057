"""Learning dynamics of the service in one process: how many train steps CartPole takes to solve, per seed.

A full `dqn-service local` run costs 2-3 minutes of both cores per seed, too slow to compare settings over many
seeds. This model keeps what shapes learning and drops the transport: the same `build_agent` (network, agent,
optimizer, target updates), the same batched gymnasium envs (2 actors x 32 by default), the same ratio of env steps
to SGD steps (batch_size / samples_per_insert), the same epsilon schedule and held random actions, the actors'
policy lag (weights copied every publish interval) and the evaluator's test (greedy average >= 475 over 10 episodes
every eval interval, from the same 10 start states each time, as the evaluator does, then >= 475 on its re-check of
30 fresh episodes; `--fresh-eval-seeds` draws new start states per evaluation, `-- --eval-confirm-episodes 0` drops
the re-check). Replay is an in-memory FIFO ring of the same items (sequence_length steps of one env, by the writer's
rules: never across an episode boundary, except n-step windows, which may run past an episode end and are closed by
the learner's `close_episode_ends`), sampled uniformly; with envs_per_item > 1 (the default) as blocks of E envs'
windows at one time, every window included, as the block writer stores them.

It measures train steps to solve, not seconds: multiply by the service's SGD steps/s (learner log) for wall time.

    python bench/learning_sim.py --seeds 1 2 3 4 5 6 -- --batch-size 256
    python bench/learning_sim.py --seeds 1 --steps 60000 --solved-return -110 -- --env-id MountainCar-v0 ...
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from tf_agents.trajectories import time_step as ts  # noqa: E402
from tf_agents.trajectories import trajectory  # noqa: E402

SOLVED_RETURN = 475.0  # CartPole-v1; --solved-return for other envs


class StepRing:
    """Time-major FIFO of Trajectory rows [T, num_envs]; samples items of `length` rows of one env.

    With `run_past_episode_end` (the actors' rule for n-step items), an item may start at any row that is not a
    boundary and reach into the next episode; otherwise (TF-Agents' observer rule) it holds one episode's rows.
    """

    def __init__(self, capacity: int, num_envs: int, observation_shape: tuple, length: int,
                 run_past_episode_end: bool, rng: np.random.Generator, envs_per_item: int = 1):
        rows = max(capacity // num_envs, length + 2)
        self._envs_per_item = envs_per_item
        self._rows, self._num_envs, self._length, self._rng = rows, num_envs, length, rng
        self._run_past_episode_end = run_past_episode_end
        self._step_type = np.zeros((rows, num_envs), np.int32)
        self._next_step_type = np.zeros((rows, num_envs), np.int32)
        self._observation = np.zeros((rows, num_envs, *observation_shape), np.float32)
        self._action = np.zeros((rows, num_envs), np.int64)
        self._reward = np.zeros((rows, num_envs), np.float32)
        self._discount = np.zeros((rows, num_envs), np.float32)
        self._head = 0
        self._filled = 0

    def add(self, time_step: ts.TimeStep, action: np.ndarray, next_time_step: ts.TimeStep) -> None:
        """One batched env step as one row per env (the Trajectory TF-Agents' driver would build)."""
        row = self._head
        self._step_type[row], self._observation[row], self._action[row] = (time_step.step_type,
                                                                           time_step.observation, action)
        self._reward[row], self._discount[row] = next_time_step.reward, next_time_step.discount
        self._next_step_type[row] = next_time_step.step_type
        self._head = (self._head + 1) % self._rows
        self._filled = min(self._filled + 1, self._rows)

    def filled_transitions(self) -> int:
        """Transitions stored (rows times envs)."""
        return self._filled * self._num_envs

    def clear(self) -> None:
        """Forgets every stored row (the learner empties the replay table at a reset)."""
        self._filled = 0

    def sample(self, batch_size: int) -> trajectory.Trajectory:
        """`batch_size` items, uniformly over all valid (start row, env) pairs.

        With block items (envs_per_item E > 1): batch_size / E (start row, block of E envs) pairs, every window
        included, as the actors' block writer stores them (the agent masks those starting on a boundary).
        """
        if self._envs_per_item > 1:
            envs_per_item, count = self._envs_per_item, batch_size // self._envs_per_item
            start = (self._head - self._rng.integers(self._length, self._filled + 1, size=count)) % self._rows
            block = self._rng.integers(0, self._num_envs // envs_per_item, size=count)
            return self._gather(np.repeat(start, envs_per_item),
                                (block[:, None] * envs_per_item + np.arange(envs_per_item)).ravel())
        starts, envs = [], []
        needed = batch_size
        checked_rows = 1 if self._run_past_episode_end else self._length - 1  # rows that may not be a boundary
        while needed > 0:
            count = 2 * needed + 8
            start = (self._head - self._rng.integers(self._length, self._filled + 1, size=count)) % self._rows
            env = self._rng.integers(0, self._num_envs, size=count)
            valid = np.ones(count, bool)
            for offset in range(checked_rows):
                valid &= self._step_type[(start + offset) % self._rows, env] != ts.StepType.LAST
            starts.append(start[valid][:needed])
            envs.append(env[valid][:needed])
            needed -= min(needed, int(valid.sum()))
        return self._gather(np.concatenate(starts), np.concatenate(envs))

    def _gather(self, starts: np.ndarray, envs: np.ndarray) -> trajectory.Trajectory:
        rows = (starts[:, None] + np.arange(self._length)[None]) % self._rows
        cols = np.broadcast_to(envs[:, None], rows.shape)
        fields = [array[rows, cols].copy() for array in (self._step_type, self._next_step_type, self._observation,
                                                           self._action, self._reward, self._discount)]
        step_type, next_step_type, observation, action, reward, discount = fields
        return trajectory.Trajectory(step_type=step_type, observation=observation, action=action, policy_info=(),
                                     next_step_type=next_step_type, reward=reward, discount=discount)


def run_seed(seed: int, args: argparse.Namespace) -> dict:
    """Trains one seed until solved or `args.steps`; returns the evaluation record."""
    import tensorflow as tf

    from dqn.builder import DqnBuilder
    from dqn.envs.vector_env import GymnasiumVectorEnvironment
    from dqn.model.agent import reinitialize_q_networks
    from dqn.model.exploration import HeldRandomActions
    from dqn.model.flat_weights import FlatWeights
    from dqn.model.graph_policy import batched_actions
    from dqn.model.schedules import epsilon_at
    from dqn.replay_layout.items import ItemShape
    from dqn.replay_layout.unpack import close_episode_ends
    from dqn.resolve import resolve_settings, run_env_specs
    from dqn.settings.config import LocalConfig
    from dqn.settings.loading import resolve
    from evaluator.evaluate import confirmation_seed, make_episodes
    from evaluator.reset_rule import FallbackResetRule

    # The service resolves its auto settings from the env once per run: so does the model.
    config = resolve_settings(resolve(LocalConfig, flags={**args.flags, "seed": str(seed)}, environ={}))
    tf.random.set_seed(seed)
    rng = np.random.default_rng(seed)
    # acting = the actors' lagged copy of the weights
    learner_builder = DqnBuilder(config, run_env_specs(config))
    learner, acting = learner_builder.agent, DqnBuilder(config, run_env_specs(config)).agent

    def publish() -> None:
        for source, target in zip(learner.policy_variables, acting.policy_variables, strict=True):
            target.assign(source)

    publish()
    num_envs = config.num_envs * config.num_actors
    env = GymnasiumVectorEnvironment(config.env_id, num_envs, seed=seed)
    collect = batched_actions(acting.agent.collect_policy, num_envs)
    episodes = make_episodes(dataclasses.replace(config, eval_episodes=10), learner_builder)
    confirmation = (make_episodes(config, learner_builder, config.eval_confirm_episodes)
                    if config.eval_confirm_episodes else None)
    learner_weights = FlatWeights(learner.policy_variables)
    shape = ItemShape.from_config(config)
    run_past_episode_end = shape.run_past_episode_end and not args.observer_windows
    ring = StepRing(config.replay_max_size, num_envs, env.observation_spec().shape, shape.sequence_length,
                    run_past_episode_end, rng, shape.envs_per_item)
    # Auto (none) is the default ratio for the cheap envs this simulates (it rises only for slow envs).
    ratio = config.samples_per_insert
    env_steps_per_train_step = config.train_batch_size() / ratio if ratio else num_envs
    if run_past_episode_end:  # what the learner's dataset does to these windows
        train = tf.function(lambda items: learner.agent.train(close_episode_ends(items, config.gamma)),
                            autograph=False)
    else:
        train = tf.function(learner.agent.train, autograph=False)
    time_step = env.reset()
    env_steps, credit, warmup = 0, 0.0, config.warmup_steps * config.num_actors

    held = (HeldRandomActions(num_envs, 0, int(env.action_spec().maximum), config.epsilon_hold_exponent, seed + 2)
            if config.epsilon_hold_exponent else None)  # the actors' rule: greedy policy, held random actions

    def step_envs(train_step: int) -> None:
        nonlocal time_step, env_steps
        epsilon = 1.0 if env_steps < warmup else epsilon_at(config, train_step - exploration_start)
        if env_steps < warmup:
            action = rng.integers(0, env.action_spec().maximum + 1, size=num_envs).astype(np.int64)
        else:
            acting.epsilon.assign(0.0 if held else epsilon)
            action = collect(time_step)
        if held:
            action = held.actions(action, epsilon, episode_starts=None if args.carry_holds
                                  else time_step.step_type == ts.StepType.FIRST)
        next_time_step = env.step(action)
        ring.add(time_step, action, next_time_step)
        time_step, env_steps = next_time_step, env_steps + num_envs

    resets = FallbackResetRule(config.fallback_reset_patience, args.solved_return)
    exploration_start = 0  # the train step the epsilon schedule counts from (a reset restarts it)

    def reset_q_network(train_step: int) -> None:
        """The learner's reset: fresh Q-network and target, epsilon from its start, replay emptied; Adam kept.

        The replay refills to replay_min_size before the next SGD step, as the actors refill the table.
        """
        nonlocal exploration_start
        reinitialize_q_networks(learner)
        exploration_start = train_step
        ring.clear()
        while ring.filled_transitions() < config.replay_min_size:
            step_envs(train_step)

    while env_steps < max(warmup, config.replay_min_size):
        step_envs(0)
    started, evals, rechecks, solved_at, max_mean_q, reset_steps = time.monotonic(), [], [], None, 0.0, []
    for train_step in range(1, args.steps + 1):
        credit += env_steps_per_train_step
        while credit >= num_envs:
            step_envs(train_step)
            credit -= num_envs
        train(ring.sample(config.train_batch_size()))
        if train_step % config.publish_interval == 0:
            publish()
        if train_step % config.eval_interval == 0:
            # Mean Q over the envs' current states: values far above 1 / (1 - gamma) mean the targets diverged.
            if not learner.q_network.state_spec:  # an RNN needs step types and a state: skipped for it
                max_mean_q = max(max_mean_q, float(np.mean(learner.agent._q_network(time_step.observation)[0])))
            eval_seed = seed + 99_991 + (train_step if args.fresh_eval_seeds else 0)  # the evaluator's seed rule
            episodes.load(learner_weights.read())
            average_return = episodes.run(eval_seed)["average_return"]
            evals.append((train_step, round(average_return)))
            if resets.observe(train_step, average_return) or train_step in args.reset_at:
                reset_q_network(train_step)
                reset_steps.append(train_step)
            if average_return >= args.solved_return and confirmation is not None:
                # The evaluator's re-check: the run counts as solved only if 30 fresh episodes agree.
                confirmation.load(learner_weights.read())
                confirmed = confirmation.run(confirmation_seed(seed, train_step))["average_return"]
                rechecks.append((train_step, round(confirmed)))
                if confirmed < args.solved_return:
                    continue
            if average_return >= args.solved_return:
                solved_at = train_step
                break
    return {"seed": seed, "solved_at_train_step": solved_at, "best_eval_return": max(r for _, r in evals),
            "env_steps": env_steps, "max_mean_q": round(max_mean_q, 1), "seconds": round(time.monotonic() - started),
            "evals_every_1000": [e for e in evals if e[0] % 1000 == 0], "rechecks": rechecks,
            "resets_at": reset_steps}


def main(argv: list[str] | None = None) -> None:
    """Runs the seeds one after another and prints one JSON row each, then the solved count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    parser.add_argument("--steps", type=int, default=6000, help="train-step budget per seed")
    parser.add_argument("--observer-windows", action="store_true",
                        help="n-step items only within one episode (TF-Agents' observer rule; their targets diverge)")
    parser.add_argument("--solved-return", type=float, default=SOLVED_RETURN,
                        help="average return that counts as solved (the env's reward_threshold; with --env-id)")
    parser.add_argument("--carry-holds", action="store_true",
                        help="held random actions go on across episode ends (the paper's rule; the actors cut them)")
    parser.add_argument("--fresh-eval-seeds", action="store_true",
                        help="new start states per evaluation (the evaluator reuses one seed)")
    parser.add_argument("--reset-at", type=int, nargs="+", default=[],
                        help="train steps (at an evaluation) to reset at as well as the rule's: a reset's cost")
    parser.add_argument("extra", nargs="*", help="service flags after --, e.g. -- --batch-size 256")
    args = parser.parse_args(argv)
    if len(args.extra) % 2:
        parser.error("extra flags come as --name value pairs")
    pairs = zip(args.extra[::2], args.extra[1::2], strict=True)
    args.flags = {name.lstrip("-").replace("-", "_"): value for name, value in pairs}
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    print(f"flags {args.extra}; budget {args.steps} train steps per seed", flush=True)
    results = []
    for seed in args.seeds:
        results.append(run_seed(seed, args))
        print(json.dumps(results[-1]), flush=True)
    solved = sorted(r["solved_at_train_step"] for r in results if r["solved_at_train_step"])
    print(f"solved {len(solved)}/{len(results)} within {args.steps} train steps; at train steps {solved}; "
          f"best returns {[r['best_eval_return'] for r in results]}", flush=True)


if __name__ == "__main__":
    main()
