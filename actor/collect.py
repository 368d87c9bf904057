"""The actor process: N parallel envs, batched epsilon-greedy inference, replay items written through the layout.

Loop: random warm-up steps, then the agent's collect policy on the whole batch of envs, one call per step:
in numpy for a plain MLP Q-network (dqn/model/numpy_policy.py), else one `tf.function` call; weights are swapped in
from the `WeightsPuller` without ever blocking.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from actor.initial_priorities import InitialPriorities
from dqn.builder import DqnBuilder
from dqn.model.schedules import epsilon_at
from dqn.process.health import start_health
from dqn.process.log_throttle import LogThrottle
from dqn.process.progress import EpisodeStats, write_progress
from dqn.process.runtime import StopSignal, use_one_core
from dqn.process.summaries import GraphScalars
from dqn.process.usage import Laps
from dqn.process.write_guard import WriteGuard
from dqn.remote.replay_client import ServerClients, wait_for_servers
from dqn.remote.role_reports import RoleReporter
from dqn.remote.weights_puller import WeightsPuller
from dqn.resolve import run_env_specs
from dqn.settings.config import ActorConfig, actor_dir

log = logging.getLogger("actor")
#: The actor's writes to the run root (summaries, progress file), which a full disk must not stop.
try_write = WriteGuard("actor")

#: Seconds the actor's last writes get at shutdown. A healthy server confirms in-flight items within milliseconds;
#: items still unconfirmed after this were never stored (after the learner stops, the rate limiter holds them for
#: good), so waiting longer saves nothing. A short final flush lets an actor exit within ~2 s of SIGTERM; confirmed
#: items are in the table already and stay there.
FINAL_FLUSH_S = 0.5


def actor_epsilon(config: ActorConfig, train_step: int) -> float:
    """Epsilon of this actor: decayed schedule, or Ape-X's fixed per-actor ladder."""
    if not config.apex_epsilon:
        return epsilon_at(config, train_step)
    i, k = config.actor_id, config.num_actors
    # ids 0..K-1 (`local`, explicit ids) keep the paper's evenly spaced ladder. Replica ids (Compose 1..N, scaled
    # without touching num_actors) take the van der Corput fraction: injective, so every id gets its own epsilon,
    # and any run of ids is spread over the whole ladder. It never equals a paper value j/(K-1) of another id.
    fraction = i / (k - 1) if i < k and k > 1 else van_der_corput(i)
    return config.apex_base_epsilon ** (1 + 7 * fraction)


def van_der_corput(n: int) -> float:
    """The binary digits of n mirrored behind the point: 0, 1/2, 1/4, 3/4, 1/8, 5/8, ... (distinct, in [0, 1))."""
    fraction, scale = 0.0, 0.5
    while n:
        n, bit = divmod(n, 2)
        fraction += bit * scale
        scale /= 2
    return fraction


def mark_faulted_steps_last(time_step: ts.TimeStep, faulted: np.ndarray) -> ts.TimeStep:
    """`time_step` as written to replay, with the step of every env whose next env step raised made LAST.

    The transition from that step is not real (the env raised instead of stepping), and no item may train on it.
    Marking its first step LAST drops it in both layouts: per-env streams make no item that starts on a boundary
    step, and in block items, which cannot leave one env out, DqnAgent's loss masks transitions whose first
    step is LAST (`valid_mask`). To the transitions before it, the episode looks truncated at that step, which
    is what happened (n-step windows stop there, dqn/replay_layout/unpack.py). Only the written copy changes; the
    policy already acted on the real step.
    """
    if not faulted.any():
        return time_step
    return time_step._replace(step_type=np.where(faulted, ts.StepType.LAST, time_step.step_type).astype(
        time_step.step_type.dtype))


class Actor:
    """One actor process's state: envs, replay writer, collect policy and counters."""

    def __init__(self, config: ActorConfig, clients: ServerClients, stop: StopSignal):
        self.config = config
        self.stop = stop
        builder = DqnBuilder(config, run_env_specs(config))
        builder.check_server_tables(clients, role="actor")
        self.seed = config.seed + 10_000 * (config.actor_id + 1)
        self.env = builder.make_envs(config.num_envs, seed=self.seed, max_restarts=config.max_env_restarts,
                                     restart_window=config.env_restart_window)
        self.writer = builder.make_writer(clients.replay, config.num_envs)
        # Actors that send their own TD errors as initial priorities need the Q-values their policy acted on.
        self.initial_priorities = (InitialPriorities(config.num_envs, config.gamma)
                                   if builder.layout.actors_send_priorities else None)
        self.policy = builder.make_collect_policy(config.num_envs, self.seed,
                                                  q_values=self.initial_priorities is not None)
        self.warmup_policy = builder.make_warmup_policy(config.num_envs, self.seed)
        # The run's actions and masks: every action taken is checked against the mask it was chosen under.
        self.valid = builder.agent.valid_actions
        self.checks_actions = self.valid.masked or self.valid.padding is not None
        self.illegal_actions = 0
        self.puller = WeightsPuller(config.control_address_resolved(), config.rpc_timeout_s, key=config.shared_key)
        self.summary_dir = config.path(actor_dir(config.actor_id))
        self.summary_writer = tf.summary.create_file_writer(self.summary_dir)
        self.scalars = GraphScalars(self.summary_writer)
        self.epsilon = config.epsilon_start  # the collect policy's epsilon
        self.stats = EpisodeStats(config.num_envs)
        self.weights_step = -1
        self.policy_lag = 0
        self.env_steps = 0
        self._previous_step_faulted = np.zeros(config.num_envs, dtype=bool)  # envs whose last env step faulted
        self.throttled_s = 0.0
        self._beat = lambda: None  # the health heartbeat, set by run()
        self.status = "warming up"
        self._last_summary = (time.monotonic(), 0)
        self._notices = LogThrottle(15.0)
        self.laps = Laps("policy_s", "held_s", "env_s", "write_s", "weights_s", "no_weights_s")
        self.reporter = RoleReporter(config.control_address_resolved(), config.rpc_timeout_s, "actor",
                                     str(config.actor_id), self.report_counters, config.report_interval_s,
                                     config.machine_name)

    def report_counters(self) -> dict[str, float]:
        """What this actor tells the replay server for the bottleneck verdict (read on the reporter's thread)."""
        return {**self.laps.seconds, "env_steps": self.env_steps, "num_envs": self.config.num_envs,
                "weights_step": self.weights_step, "warming_up": float(self.env_steps < self.config.warmup_steps),
                "downloads": self.puller.downloads, "download_s": self.puller.download_s,
                "download_bytes": self.puller.download_bytes}

    def _apply_new_weights(self) -> None:
        weights = self.puller.latest()
        if weights is None:
            return
        started = time.perf_counter()
        self.policy.set_weights(weights.variables)
        self.laps.seconds["weights_s"] += time.perf_counter() - started
        self.policy_lag = max(0, weights.train_step - self.weights_step) if self.weights_step >= 0 else 0
        self.weights_step = weights.train_step
        self.epsilon = actor_epsilon(self.config, weights.exploration_step)
        self.policy.set_epsilon(self.epsilon)

    def _notice(self, message: str, *args: object) -> None:
        """Logs a degraded-state message at most every 15 s."""
        if self._notices.ready():
            log.info(message, *args)

    def _wait_for_replay(self) -> None:
        """Backpressure: hold the envs while the rate limiter (or a dead server) holds inserts back."""
        while not self.writer.wait_for_server(self.config.max_pending_items, timeout_ms=1000):
            self._beat()  # a wait under a deadline is a loop that runs: the learner may be down for long
            self.throttled_s += 1.0
            self.status = "throttled (learner behind or replay unreachable)"
            self.maybe_summarize()
            self._notice("replay inserts held back for %.0f s in total (learner behind or server down)",
                         self.throttled_s)
            # After a network cut the server may have dropped its side of the connection while ours still looks
            # open, so the writers would wait for confirmations forever. A deadline-bound RPC on the same
            # channel draws a reset; gRPC reconnects and the writers resend what was not confirmed.
            self.puller.request()
            self._apply_new_weights()  # stay current while held back: the next steps use the newest policy
            if self.stop.requested:
                return

    def step(self) -> None:
        """One batched step of all envs: choose actions, step, write the N envs' transitions."""
        warming_up = self.env_steps < self.config.warmup_steps
        policy = self.warmup_policy if warming_up else self.policy
        self.laps.start()
        action, q_values = policy.actions(self.time_step)
        mask = self.valid.mask(self.time_step.observation) if self.checks_actions else None
        if mask is not None:
            self.illegal_actions += self.valid.illegal(action, mask)
        self.laps.lap("policy_s")
        self._wait_for_replay()
        self.laps.lap("held_s")
        next_time_step = self.env.step(action)
        self.laps.lap("env_s")
        faulted = self.env.faulted
        priorities = None
        if self.initial_priorities is not None:
            # The Q-values are of this step's observation: the max that closes the transition into it is over the
            # actions valid there.
            priorities = self.initial_priorities.closing(q_values, mask)
            # Envs whose previous env step faulted wrote that transition masked (its first step made LAST): it
            # adds nothing to its block's priority.
            priorities[self._previous_step_faulted] = 0.0
            self.initial_priorities.taken(q_values, action, next_time_step.reward, next_time_step.discount)
        self._previous_step_faulted = faulted
        self.writer.append(mark_faulted_steps_last(self.time_step, faulted), action, next_time_step, priorities)
        self.laps.lap("write_s")
        self.stats.update(next_time_step, dropped=faulted)
        self.time_step = next_time_step
        self.env_steps += self.config.num_envs
        self.status = "warming up" if warming_up else "collecting"

    def maybe_summarize(self, force: bool = False) -> None:
        """TensorBoard scalars and the progress file, every summary_interval_s (or now, if forced)."""
        now = time.monotonic()
        last_time, last_steps = self._last_summary
        if now - last_time < self.config.summary_interval_s and not force:
            return
        rate = (self.env_steps - last_steps) / max(now - last_time, 1e-9)
        self._last_summary = (now, self.env_steps)
        scalars = {"actor/env_steps_per_sec": rate,
                   "actor/epsilon": self.epsilon if self.weights_step >= 0 else 1.0,
                   "actor/weights_train_step": self.weights_step,
                   "actor/policy_lag_at_refresh": self.policy_lag,
                   "actor/episodes": self.stats.episodes,
                   "actor/env_restarts": self.env.restarts,
                   "actor/illegal_actions": self.illegal_actions,
                   "actor/throttled_seconds": self.throttled_s,
                   "actor/refused_weights": self.puller.refused.count}
        if self.stats.recent_returns:
            scalars.update({"actor/average_return": self.stats.average_return(),
                            "actor/average_episode_length": self.stats.average_length()})
        # A full run root costs the summaries and the progress file, never the collecting.
        try_write("summaries", self.scalars.write, self.env_steps, scalars)  # one graph call
        try_write("progress file", write_progress, self.summary_dir, env_steps=self.env_steps,
                  env_steps_per_sec=rate, episodes=self.stats.episodes, env_restarts=self.env.restarts,
                  illegal_actions=self.illegal_actions, weights_train_step=self.weights_step,
                  items=self.writer.items_created, epsilon=scalars["actor/epsilon"],
                  refused_weights=self.puller.refused.count, status=self.status)

    def run(self, beat=lambda: None) -> None:
        """Collects until a stop signal or max_env_steps; calls `beat()` on every pass (the health heartbeat)."""
        self._beat = beat
        config = self.config
        next_refresh, next_refresh_time = config.warmup_steps, 0.0
        self.time_step = self.env.reset()
        while not self.stop.requested and not (config.max_env_steps and self.env_steps >= config.max_env_steps):
            beat()
            if self.env_steps >= config.warmup_steps:
                # Why a time bound too: with few or slow envs, env steps alone would let the policy fall hundreds
                # of train steps behind the learner (and exploration that follows the greedy policy stall).
                if self.env_steps >= next_refresh or time.monotonic() >= next_refresh_time:
                    next_refresh = self.env_steps + config.weights_refresh_interval
                    next_refresh_time = time.monotonic() + config.weights_refresh_interval_s
                    self.puller.request()
                self._apply_new_weights()
                if self.weights_step < 0:
                    # No weights yet: the wait is visible and never blocks (the puller polls in the background).
                    self.status = f"waiting for first weights ({self.puller.status})"
                    self._notice("warm-up done; waiting for first weights from the learner (%s)", self.puller.status)
                    self.maybe_summarize()
                    self.laps.start()
                    self.stop.wait(0.2)
                    self.laps.lap("no_weights_s")
                    continue
            self.step()
            self.maybe_summarize()

    def close(self) -> None:
        """Flushes what the server accepts within FINAL_FLUSH_S, then releases everything."""
        self.writer.close(timeout_ms=int(min(FINAL_FLUSH_S, self.config.rpc_timeout_s) * 1000))
        self.status = "stopped"
        self.maybe_summarize(force=True)  # the launcher's final summary reads the env steps from here
        self.reporter.close()
        self.puller.close()
        try_write("summaries", self.summary_writer.flush)
        self.env.close()


def run(config: ActorConfig) -> int:
    """Collects until stopped (SIGTERM/SIGINT) or `max_env_steps`; returns the exit code."""
    use_one_core()
    stop = StopSignal()
    health = start_health(config, "actor")
    actor = Actor(config, wait_for_servers(config), stop)
    health.set(True)
    log.info("actor %d: %d envs of %s, writing to %s; policy in %s%s", config.actor_id, config.num_envs,
             config.env_id, config.replay_address, "numpy" if actor.policy.runs_in == "numpy" else "a graph call",
             "; initial priorities: own TD errors" if actor.initial_priorities else "")
    actor.run(health.beat)
    log.info("stopping after %d env steps (%s)", actor.env_steps, stop.signal_name or "max_env_steps reached")
    health.set(False)
    actor.close()
    health.stop()
    return 0
