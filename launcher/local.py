"""`dqn-service local`: the whole topology as separate OS processes on free loopback ports.

The roles run in a network namespace of their own where the kernel allows it (launcher/network.py): no other host
reaches the replay port, whose server listens on every interface; elsewhere `local` warns at start.
Starts replay server, learner, `num_actors` actors, the evaluator (and optionally TensorBoard on 127.0.0.1), shows
one live progress line, stops at max_train_steps (once the evaluator has scored the last weights) or target return,
and stops every child cleanly on Ctrl-C/SIGTERM. A role that exits non-zero is restarted with backoff, as compose's and
Kubernetes' restart policies would (every role resumes from its checkpoint or the replay server); a role that
keeps failing (max_role_restarts within role_restart_window_s) ends the run, which then exits 1.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time

import portpicker

from dqn.process.cgroup import memory_limit
from dqn.process.log_throttle import LogThrottle
from dqn.process.progress import read_progress
from dqn.process.runtime import StopSignal
from dqn.resolve import resolve_run, run_env_specs
from dqn.settings import loading as config_loading
from dqn.settings.config import LocalConfig, actor_dir, role_dir
from evaluator.best import reaches_target
from evaluator.random_baseline import format_return, kept_below_random_play, read_random_play
from launcher.eval_records import EvalRecords
from launcher.forked import ForkedRole, role_error_line
from launcher.network import exposure_warning, isolation_refusal, network_namespace
from launcher.verdict_line import read_verdict, short_verdict
from replay_server.checkpoint_dir import check_checkpoint_dir
from replay_server.memory_check import check_replay_memory

log = logging.getLogger("local")

STOP_GRACE_S = 60.0
#: The replay server's final checkpoint of a GB-sized table takes most of a minute, after any periodic one under
#: way: the compose file and the Kubernetes manifest give it 2 minutes too.
REPLAY_STOP_GRACE_S = 120.0
#: Restart backoff: 1 s after a role's first exit in the window, doubling up to this.
MAX_BACKOFF_S = 30.0
#: Exit code of bad input (config, env, checkpoint mismatch): a restart would fail the same way.
BAD_INPUT_EXIT = 2
#: Longest wait, once the learner has reached max_train_steps, for the evaluator to score its last weights.
FINAL_EVALUATION_WAIT_S = 300.0


@dataclasses.dataclass
class Child:
    """One role process and where its log goes."""

    name: str
    process: subprocess.Popen | ForkedRole
    log_path: str
    essential: bool = True  # a crash of an essential role fails the run
    argv: list[str] | None = None  # how to start it again (forked roles)
    restarts: list[float] = dataclasses.field(default_factory=list)  # monotonic times of its restarts
    restart_at: float | None = None  # when a pending restart is due
    started_at: float = dataclasses.field(default_factory=time.time)  # epoch s: older progress is an earlier run's
    log_start: int = 0  # where this run's lines begin in its log

    @property
    def pid(self) -> int:
        """The child's PID."""
        return self.process.pid

    def exit_code(self) -> int | None:
        """Exit code, or None while running."""
        return self.process.poll()


def say(*parts: object, end: str = "\n", flush: bool = True) -> None:
    """Prints to the console; once the console is gone (a closed pipe), output goes nowhere and the run goes on.

    The run dir keeps what the console shows (logs, evaluations, progress), and a launcher that died of a closed
    pipe would leave its roles training with nobody to stop them.
    """
    try:
        print(*parts, end=end, flush=flush)
    except (OSError, ValueError):  # BrokenPipeError, or a closed stream
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass


class Topology:
    """Starts and stops the role processes of one local run."""

    def __init__(self, config: LocalConfig):
        self.config = config
        self.children: list[Child] = []
        os.makedirs(config.path("logs"), exist_ok=True)
        self.config_path = config.path("config.json")
        config_loading.write_config(config, self.config_path)
        self.replay_port = portpicker.pick_unused_port()
        self.replay_health_port = portpicker.pick_unused_port()
        self.replay_address = f"localhost:{self.replay_port}"

    def _spawn(self, name: str, command: list[str], essential: bool = True) -> Child:
        log_path = self.config.path("logs", f"{name}.log")
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, start_new_session=True)
        child = Child(name, process, log_path, essential)
        self.children.append(child)
        return child

    def _role(self, name: str, role: str, *flags: str) -> Child:
        """One role, forked with the ML stack already imported (launcher/forked.py): what `dqn-service ROLE` runs."""
        argv = [role, "--config", self.config_path, "--replay-address", self.replay_address, *flags]
        log_path = self.config.path("logs", f"{name}.log")
        log_start = os.path.getsize(log_path) if os.path.exists(log_path) else 0  # an earlier run's lines come first
        child = Child(name, ForkedRole(name, argv, log_path), log_path, argv=argv, log_start=log_start)
        self.children.append(child)
        return child

    @property
    def restarts(self) -> int:
        """Role restarts so far."""
        return sum(len(c.restarts) for c in self.children)

    def restart_failed_roles(self, now: float) -> str | None:
        """Restarts roles that exited non-zero, after a backoff; returns why the run must end, if it must.

        The same argv and log file (appended): every role is built to be restarted. Bad input (exit 2) is not
        retried, and neither is a role that exited more than max_role_restarts times within the window.
        """
        config = self.config
        for child in self.children:
            code = child.exit_code()
            if not child.essential or child.argv is None or code in (None, 0):
                continue
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restart_at = None
                    child.restarts.append(now)
                    child.process = ForkedRole(child.name, child.argv, child.log_path)
                    log.info("restarted %s (pid %d)", child.name, child.pid)
                continue
            recent = [t for t in child.restarts if now - t < config.role_restart_window_s]
            if code == BAD_INPUT_EXIT or len(recent) >= config.max_role_restarts:
                refusal = role_error_line(child.log_path, child.log_start) if code == BAD_INPUT_EXIT else ""
                if not config.max_role_restarts:
                    return f"crashed: {child.name} exited {code}{refusal} (log {child.log_path})"
                why = (f"bad input: a restart would fail the same way{refusal}" if code == BAD_INPUT_EXIT else
                       f"crash loop: {len(recent)} restart(s) within {config.role_restart_window_s:.0f} s, "
                       f"max_role_restarts {config.max_role_restarts}")
                return f"crashed: {child.name} exited {code} ({why}; log {child.log_path})"
            backoff = min(MAX_BACKOFF_S, 2.0 ** len(recent))
            child.restart_at = now + backoff
            fresh_line = "\n" if sys.stdout.isatty() else ""  # below the live progress line
            say(f"{fresh_line}dqn-service local: {child.name} exited {code}; restarting it in {backoff:.0f} s "
                  f"(restart {len(recent) + 1} of {config.max_role_restarts} within "
                  f"{config.role_restart_window_s:.0f} s; log {child.log_path})", flush=True)
        return None

    def pending_restart(self, name: str) -> bool:
        """True if the role exited and waits for its restart (the run stopped before it was due)."""
        return any(c.name == name and c.restart_at is not None for c in self.children)

    def start(self) -> None:
        """Replay server first (so the others find it quickly), then learner, actors, evaluator."""
        config = self.config
        self._role("replay-server", "replay-server", "--port", str(self.replay_port),
                   "--health-port", str(self.replay_health_port), "--health-host", "127.0.0.1")
        self._role("learner", "learner")
        for actor_id in range(config.num_actors):
            self._role(f"actor-{actor_id}", "actor", "--actor-id", str(actor_id),
                       "--num-actors", str(config.num_actors))
        self._role("evaluator", "evaluator")
        if config.tensorboard:
            self._spawn("tensorboard", [sys.executable, "-m", "tensorboard.main", "--logdir", config.root_dir,
                                        "--host", "127.0.0.1", "--port", str(config.tensorboard_port)],
                        essential=False)
            say(f"TensorBoard: http://127.0.0.1:{config.tensorboard_port}/", flush=True)

    def network_line(self) -> str:
        """Where the roles' ports are reachable from: their own network namespace, or a warning naming the exposure."""
        replay = next(c for c in self.children if c.name == "replay-server")
        if network_namespace(replay.pid) not in (None, network_namespace(os.getpid())):
            return (f"dqn-service local: the roles run in a network namespace of their own (replay server pid "
                    f"{replay.pid}): no other host reaches the replay port {self.replay_port}")
        reason = ("--isolate-network false" if not self.config.isolate_network else
                  isolation_refusal() or "the roles' forkserver was started without it")
        return exposure_warning(self.replay_port, reason)

    def stop(self, stages: tuple[tuple[str, ...], ...] = (("actor", "evaluator", "tensorboard"), ("learner",),
                                                         ("replay-server",))) -> dict[str, int]:
        """SIGTERM stage by stage, each stage waited for; SIGKILL after the grace period.

        Data producers stop first while the learner still samples: the rate limiter then lets their last items
        in at once, where with the learner stopped too each actor's final flush waited its full deadline.
        The replay server stops last and checkpoints what everyone wrote.
        """
        for stage in stages:
            group = [c for c in self.children if c.name.startswith(stage)]
            for child in group:
                if child.exit_code() is None:
                    child.process.send_signal(signal.SIGTERM)
            grace = REPLAY_STOP_GRACE_S if stage == ("replay-server",) else STOP_GRACE_S
            deadline = time.monotonic() + grace
            for child in group:
                try:
                    child.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("%s (pid %d) did not stop in %.0f s; killing it", child.name, child.pid, grace)
                    child.process.kill()
                    child.process.wait(10)
        return {c.name: c.process.returncode for c in self.children}


def progress_line(config: LocalConfig, elapsed: float, best: dict | None, role_restarts: int = 0,
                  latest: dict | None = None, verdict: dict | None = None) -> tuple[str, int, int]:
    """(one-line status, train step, env steps) from the roles' progress files and the server's verdict."""
    learner = read_progress(config.path(role_dir("learner")))
    actors = [read_progress(config.path(actor_dir(i))) for i in range(config.num_actors)]
    env_steps = sum(a.get("env_steps", 0) for a in actors)
    env_restarts = sum(a.get("env_restarts", 0) for a in actors)
    replay = read_progress(config.path(role_dir("replay-server")))
    rate = sum(a.get("env_steps_per_sec", 0.0) for a in actors)
    train_step = learner.get("train_step", 0)
    eval_text = (f"eval {latest['average_return']:.1f} @ {latest['train_step']}" if latest else "eval -")
    best_text = f" (best {best['average_return']:.1f})" if best else ""
    line = (f"[{elapsed:6.0f}s] train step {train_step}/{config.max_train_steps} | env steps {env_steps} "
            f"({rate:,.0f}/s) | {eval_text}{best_text}")
    if role_restarts or env_restarts:
        line += f" | restarts: roles {role_restarts}, envs {env_restarts}"
    if replay.get("checkpoint_error"):
        line += " | replay checkpoints FAILING (see its log)"
    if verdict is not None:
        line += f" | limit: {short_verdict(verdict)}"
    return line, train_step, env_steps


def env_restarts(config: LocalConfig) -> int:
    """Sub-environment restarts of all actors, from their progress files."""
    return sum(read_progress(config.path(actor_dir(i))).get("env_restarts", 0) for i in range(config.num_actors))


def illegal_actions(config: LocalConfig) -> int:
    """Forbidden actions (by a mask) the actors and evaluator took or the learner's target used: 0 unless broken."""
    directories = [actor_dir(i) for i in range(config.num_actors)] + [role_dir("learner"), role_dir("evaluator")]
    return sum(read_progress(config.path(directory)).get("illegal_actions", 0) for directory in directories)


def learner_finished(config: LocalConfig, learner: Child) -> bool:
    """True once the learner reached max_train_steps: it then stays up idle and its progress file says so.

    Only progress written since this run started counts, and its train step is checked too: the progress file of an
    earlier run in the same run directory ends nothing before this run's learner has restored and reported. A
    learner that exited 0 (stopped from outside) ends the run as before.
    """
    if learner.exit_code() == 0:
        return True
    progress = read_progress(config.path(role_dir("learner")))
    return (bool(progress.get("finished")) and progress.get("time", 0.0) >= learner.started_at
            and progress.get("train_step", 0) >= config.max_train_steps)


def final_evaluation_due(config: LocalConfig, latest: dict | None, waited_s: float) -> bool:
    """Whether to wait for the evaluator to score the weights the learner published as it reached max_train_steps.

    The evaluator takes weights eval_interval steps past its last evaluation, so the last ones are due when training
    ended that far past it; without the wait the run would stop before the policy it trained to is ever scored.
    """
    last = latest["train_step"] if latest else -config.eval_interval
    return config.max_train_steps - last >= config.eval_interval and waited_s < FINAL_EVALUATION_WAIT_S


def solves(evaluation: dict | None, target: float | None) -> bool:
    """True when an evaluation record of trained weights reaches the target return (`reaches_target`).

    Only trained weights count: the initial network (train step 0) sometimes scores the target on the 10 fixed
    episodes by luck (a random net on scaled CartPole inputs acts as a crude linear controller, and a lucky one
    scores high on a few episodes without having learned anything). Where the evaluator re-checks candidates on
    fresh episodes (`eval_confirm_episodes`), the re-check's average decides.
    """
    if evaluation is None or evaluation["train_step"] <= 0:
        return False
    return reaches_target(evaluation["average_return"], evaluation.get("confirmed_return"), target,
                          bool(evaluation.get("confirm_episodes")))


def run(config: LocalConfig) -> int:
    """Runs the local topology to completion; returns the exit code."""
    stop = StopSignal()
    # The run's auto settings, decided once before any role starts: every role is handed the same values.
    config = resolve_run(config, config.path("config.json"))
    specs = run_env_specs(config)
    target = config.resolved_target_return(specs.reward_threshold)
    # Bad input is refused before any role starts.
    check_checkpoint_dir(config.resolved_checkpoint_dir())
    memory_warning = check_replay_memory(config, specs.observation, memory_limit())
    if memory_warning:
        say(f"dqn-service local: WARNING: {memory_warning}", flush=True)
    topology = Topology(config)
    started = time.monotonic()
    topology.start()
    say(topology.network_line(), flush=True)
    try:
        return watch_until_done(config, topology, stop, target, started)
    finally:
        # Whatever ends the supervisor (its console gone, a bug), the roles must not train on without it.
        topology.stop()


def watch_until_done(config: LocalConfig, topology: Topology, stop: StopSignal, target: float | None,
                     started: float) -> int:
    """Watches the started roles until the run ends, stops them stage by stage, prints the summary: the exit code."""
    say(f"dqn-service local: {config.num_actors} actors x {config.num_envs} envs on {config.env_id}, "
          f"replay at {topology.replay_address}, run dir {config.root_dir} (logs in {config.path('logs')})",
          flush=True)
    interactive = sys.stdout.isatty()
    reason, best, progress_lines = "stopped", None, LogThrottle(10.0)
    train_step = env_steps = 0
    evaluations = EvalRecords(config.root_dir)
    solving = latest = learner_done = None
    shown_part = None
    while True:
        elapsed = time.monotonic() - started
        for record in evaluations.new():
            latest = record
            # The best, like a solve, counts trained weights only (see `solves`).
            if record["train_step"] > 0 and (best is None or record["average_return"] > best["average_return"]):
                best = record
            if solving is None and solves(record, target):
                solving = record
        verdict = read_verdict(config.root_dir)
        line, train_step, env_steps = progress_line(config, elapsed, best, topology.restarts, latest, verdict)
        if interactive:
            say("\r" + line.ljust(110), end="", flush=True)
        elif progress_lines.ready():
            say(line, flush=True)
        if not interactive and verdict and verdict.get("part") != shown_part:
            shown_part = verdict.get("part")
            say(f"bottleneck: {verdict.get('line')}", flush=True)
        ended = topology.restart_failed_roles(time.monotonic())
        if ended:
            reason = ended
            break
        if solving is not None:
            confirmed = (f", {solving['confirm_episodes']} fresh episodes {solving['confirmed_return']:.1f}"
                         if solving.get("confirm_episodes") else "")
            reason = f"solved: eval average return {solving['average_return']:.1f}{confirmed} >= {target}"
            break
        learner = next(c for c in topology.children if c.name == "learner")
        if learner_finished(config, learner):
            if learner_done is None:
                learner_done = time.monotonic()
                if final_evaluation_due(config, latest, 0.0):
                    fresh_line = "\n" if interactive else ""  # below the live progress line
                    say(f"{fresh_line}dqn-service local: the learner reached max_train_steps; waiting up to "
                          f"{FINAL_EVALUATION_WAIT_S:.0f} s for the evaluation of its last weights", flush=True)
            if not final_evaluation_due(config, latest, time.monotonic() - learner_done):
                reason = "max_train_steps reached"
                break
        if config.max_wall_time_s and elapsed >= config.max_wall_time_s:
            reason = f"max_wall_time_s ({config.max_wall_time_s:.0f} s) reached"
            break
        if stop.wait(0.5):  # short: the solved moment is reported (and timed by the bench) promptly
            reason = f"{stop.signal_name} received"
            break
    if interactive:
        say()
    wall = time.monotonic() - started  # the moment the run ended (solved, ...), before the roles' shutdown
    if verdict:
        say(f"bottleneck (last verdict): {verdict.get('line')}", flush=True)
    say(f"dqn-service local: {reason} at {wall:.1f} s; stopping the roles", flush=True)
    exit_codes = topology.stop()
    # The progress files lag by up to a summary interval, so a quick solve can end the run before any was written.
    # The roles write a last one when they stop, and the solving evaluation names the train step it evaluated.
    _, final_train_step, final_env_steps = progress_line(config, wall, best)
    train_step = max(train_step, final_train_step, best["train_step"] if best else 0)
    env_steps = max(env_steps, final_env_steps)
    solved = reason.startswith("solved")
    evaluator_dir = config.path(role_dir("evaluator"))
    random_play = read_random_play(evaluator_dir)
    say(f"summary: solved={'yes' if solved else 'no'} wall_time={wall:.1f}s env_steps={env_steps} "
          f"train_steps={train_step} best_eval_return={best['average_return'] if best else float('nan'):.1f} "
          f"target={target} role_restarts={topology.restarts} env_restarts={env_restarts(config)} "
          f"illegal_actions={illegal_actions(config)} "
          f"random_play_return={format_return(random_play['average_return']) if random_play else 'nan'}", flush=True)
    below = kept_below_random_play(evaluator_dir)
    if below:
        say(f"warning: {below}", flush=True)
    say("exit codes: " + ", ".join(f"{name}={code}" for name, code in exit_codes.items()), flush=True)
    # A role that had exited and waited for its restart when the run stopped was being recovered, not failing.
    failed = reason.startswith("crashed") or [n for n, code in exit_codes.items()
                                              if code != 0 and n != "tensorboard" and not topology.pending_restart(n)]
    return 1 if failed else 0

