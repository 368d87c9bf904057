"""`judge`: which part limits the run now, from the roles' windows (dqn/bottleneck/reports.py). Pure: no I/O.

The replay table's rate limiter keeps actors and learner at `samples_per_insert`, so one side always waits for the
other, and the replay server's table worker says which: inserts held until the learner samples (the learner's
side is short) or samples held until actors insert (the actors' side is short). Each role's own times then say
which part of that side: the learner's train step or its CPU; the actors' env steps, policy calls, writes
waiting on the server, weight swaps, or their CPU. A role that waits for a core it cannot get is limited by its
machine (the evaluator's, where that one takes the core). Writes and samples that wait while the table's worker
is neither holding them nor busy wait on the link or on a replay server starved of CPU.

Thresholds are shares of wall time, chosen so that only a part that takes most of its side's time is named: a
side that waits under a third of the time on the other is not short, and a run where neither is short is
"balanced".
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from dqn.bottleneck.reports import RoleWindow, ServerWindow

#: The parts a verdict names.
PARTS = ("learner", "replay server", "replay link", "actors' envs", "actor inference", "weight transfer",
         "evaluator", "machine's cores", "balanced", "warming up")
#: A side waits on the other at least this share of its time: it is the longer side, the other is short.
WAITS = 1 / 3
#: A role kept from a core at least this share of the CPU it wanted is limited by its machine.
STARVED = 0.4
#: An evaluator that uses at least this many cores on a machine where a limiting role waits for one takes it.
EVALUATOR_CORES = 0.5
#: Actors whose weights are this many publications behind the learner act on a stale policy.
STALE_PUBLICATIONS = 4.0


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the verdict is drawn from: the roles' windows, the server's, and the run's replay ratio."""

    window_s: float
    learner: RoleWindow | None
    actors: list[RoleWindow]
    evaluators: list[RoleWindow]
    server: ServerWindow | None
    samples_per_insert: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (recorded observations are test fixtures)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Observation:
        """The observation of `to_dict`."""
        role = RoleWindow.from_dict
        return cls(value["window_s"], role(value["learner"]) if value.get("learner") else None,
                   [role(a) for a in value["actors"]], [role(e) for e in value["evaluators"]],
                   ServerWindow.from_dict(value["server"]) if value.get("server") else None,
                   value["samples_per_insert"])


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The part that limits the run, why, what would move it, the evidence and the figures behind it."""

    part: str
    why: str
    change: str
    evidence: list[str]
    figures: dict[str, float]

    def line(self) -> str:
        """One line: the part, why, and the change."""
        return f"{self.part}: {self.why}" + (f"; {self.change}" if self.change else "")


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


@dataclasses.dataclass(frozen=True)
class _Actors:
    """The actors' windows summed and averaged."""

    count: int
    per_s: float  # transitions inserted, all actors
    shares: dict[str, float]  # mean share of each actor's time: env, policy, held, write, weights, downloads
    cpu: float
    starved: float
    hosts: set[str]

    @classmethod
    def of(cls, actors: list[RoleWindow]) -> _Actors:
        names = {"env": "env_s", "policy": "policy_s", "held": "held_s", "write": "write_s", "weights": "weights_s",
                 "downloads": "download_s", "no_weights": "no_weights_s"}
        shares = {short: _mean([a.share(name) for a in actors]) for short, name in names.items()}
        return cls(len(actors), sum(a.rate("env_steps") for a in actors), shares, _mean([a.cpu for a in actors]),
                   _mean([a.starved or 0.0 for a in actors]), {a.host for a in actors})


def _figures(obs: Observation, actors: _Actors) -> dict[str, float]:
    """The capacity figures: rates, shares of time, and how many actors each part serves at the measured rates."""
    learner, server = obs.learner, obs.server
    per_actor = actors.per_s / actors.count
    # What one actor would insert if the server never held it back: its rate over its share of time not held.
    per_actor_free = per_actor / max(0.05, 1.0 - actors.shares["held"])
    figures = {"actors": float(actors.count), "inserted_per_s": actors.per_s, "per_actor_per_s": per_actor,
               "per_actor_unheld_per_s": per_actor_free,
               **{f"actor_{name}_share": value for name, value in actors.shares.items()},
               "actor_cpu": actors.cpu, "actor_starved": actors.starved}
    if learner is not None:
        batch = learner.levels.get("batch", 0.0)
        sgd = learner.rate("sgd_steps")
        consumed = sgd * batch
        # What the learner would take if it never waited for data.
        consumed_free = consumed / max(0.05, 1.0 - learner.share("data_wait_s"))
        ratio = obs.samples_per_insert if obs.samples_per_insert > 0 else consumed / max(actors.per_s, 1e-9)
        figures.update({"sgd_steps_per_s": sgd, "learner_sampled_per_s": consumed,
                        "learner_data_wait_share": learner.share("data_wait_s"),
                        "learner_train_share": learner.share("train_s"), "learner_cpu": learner.cpu,
                        "learner_starved": learner.starved or 0.0,
                        "learner_wants_per_s": consumed_free / max(ratio, 1e-9),
                        "actors_before_learner_binds": consumed_free / max(ratio, 1e-9) / max(per_actor_free, 1e-9)})
        lags = [learner.levels["train_step"] + sgd * (learner_wall_gap(learner, a)) - a.levels["weights_step"]
                for a in obs.actors if a.levels.get("weights_step", -1) >= 0]
        if lags:
            lag = max(0.0, statistics.median(lags))
            figures.update({"policy_lag_steps": lag,
                            "policy_lag_publications": lag / max(1.0, learner.levels.get("publish_interval", 1.0))})
    if server is not None:
        figures.update({"server_cpu": server.cpu, "server_starved": server.starved or 0.0,
                        **{f"server_{name}_share": value for name, value in server.worker.items()},
                        "weight_pulls_per_s": server.pulls_per_s})
        if server.cpu > 0.01 and actors.per_s > 0:
            # Server CPU grows with inserts (and the samples they allow): actors one server core would serve.
            figures["actors_per_server_core"] = actors.per_s / server.cpu / max(per_actor_free, 1e-9)
    downloads = sum(a.rate("downloads") for a in obs.actors)
    if downloads > 0:
        figures["mb_per_weight_pull"] = sum(a.rate("download_bytes") for a in obs.actors) / downloads / 1e6
    return figures


def learner_wall_gap(learner: RoleWindow, actor: RoleWindow) -> float:
    """Seconds from the learner's newest report to the actor's, by their senders' clocks (kept within a window)."""
    return max(-learner.seconds, min(learner.seconds, actor.wall - learner.wall))


def _machine(obs: Observation, host: str, who: str) -> tuple[str, str, str]:
    """(part, why, change) for a role on `host` kept from its cores: the evaluator's doing, or the machine's."""
    on_host = [e for e in obs.evaluators if e.host == host]
    evaluator_cpu = sum(e.cpu for e in on_host)
    if evaluator_cpu >= EVALUATOR_CORES:
        return ("evaluator", f"the evaluator uses {evaluator_cpu:.1f} cores on {host}, where the {who} waits for one",
                "evaluate less often (--eval-interval, --eval-episodes) or run the evaluator on another machine")
    return ("machine's cores", f"the {who} waits for a core on {host} ({_cores_text(obs, host)})",
            "give the roles on that machine more cores, or move some (actors, the evaluator) to another machine")


def _cores_text(obs: Observation, host: str) -> str:
    windows = [w for w in (obs.learner, *obs.actors, *obs.evaluators) if w is not None and w.host == host]
    used = sum(w.cpu for w in windows)
    cores = max((w.cores for w in windows), default=0.0)
    loads = [w.load1 for w in windows if w.load1 is not None]
    load = f", load {loads[0]:.1f}" if loads else ""
    return f"this run's roles there use {used:.1f} of {cores:g} cores{load}"


def judge(obs: Observation) -> Verdict:
    """The part that limits the run now, with its evidence, the change that would move it and the capacity figures."""
    actors, learner, server = obs.actors, obs.learner, obs.server
    if learner is None or not actors or any(a.levels.get("warming_up", 0) for a in actors):
        missing = "the learner's reports" if learner is None else "the actors' reports" if not actors else \
            "the actors' warm-up to end"
        return Verdict("warming up", f"waiting for {missing}", "", [], {})
    pack = _Actors.of(actors)
    figures = _figures(obs, pack)
    shares = pack.shares
    held, data_wait = shares["held"], learner.share("data_wait_s")
    inserts_held = server.worker["inserts_held"] if server else 0.0
    samples_held = server.worker["samples_held"] if server else 0.0
    evidence = _evidence(obs, pack, figures)
    if shares["no_weights"] > WAITS:
        return Verdict("warming up", f"actors wait for the learner's first weights "
                                     f"({shares['no_weights']:.0%} of their time)", "", evidence, figures)
    stale = figures.get("policy_lag_publications", 0.0)
    weights_share = shares["weights"] + shares["downloads"]
    if stale >= STALE_PUBLICATIONS or weights_share > 0.5:
        return Verdict("weight transfer",
                       f"actors act on weights {stale:.1f} publications behind the learner and spend "
                       f"{weights_share:.0%} of their time fetching and swapping weights "
                       f"({figures.get('mb_per_weight_pull', 0.0):.1f} MB a pull, "
                       f"{figures.get('weight_pulls_per_s', 0.0):.0f} pulls/s)",
                       "publish less often (--publish-interval), refresh less often (--weights-refresh-interval-s), "
                       "or a smaller network; past one server: weights relays", evidence, figures)
    learner_short = held >= WAITS and inserts_held >= WAITS and data_wait < WAITS
    actors_short = data_wait >= WAITS and held < WAITS
    if learner_short:
        if (learner.starved or 0.0) >= STARVED:
            part, why, change = _machine(obs, learner.host, "learner")
            return Verdict(part, why, change, evidence, figures)
        enough = figures["actors_before_learner_binds"]
        spi = obs.samples_per_insert
        return Verdict("learner", f"actors are held back {held:.0%} of their time until the learner samples "
                                  f"(replay ratio {spi:g}); the learner trains {learner.share('train_s'):.0%} "
                                  f"of its time", _learner_change(spi, enough, pack.count), evidence, figures)
    if actors_short or (data_wait >= WAITS and held >= WAITS):
        return _actor_side(obs, pack, figures, evidence, samples_held)
    return Verdict("balanced", f"actors held back {held:.0%} of their time, the learner waits for data "
                               f"{data_wait:.0%} of its time",
                   f"≈{figures['actors_before_learner_binds']:.1f} actors keep the learner busy", evidence, figures)


def _learner_change(spi: float, enough: float, count: int) -> str:
    lower = f"a lower replay ratio (--samples-per-insert {spi / 2:g} lets the learner use twice the data)" \
        if spi > 1 else "a faster learner"
    return (f"{lower}, a faster learner (GPU, --train-steps-per-call), or fewer actors: "
            f"≈{enough:.1f} keep it busy, {count} run")


def _actor_side(obs: Observation, pack: _Actors, figures: dict[str, float], evidence: list[str],
                samples_held: float) -> Verdict:
    """The learner waits for data: which part of the actors' side (or the server between) is short."""
    shares, server = pack.shares, obs.server
    held = shares["held"]
    more = f"≈{figures['actors_before_learner_binds']:.1f} actors before the learner binds, {pack.count} run"
    if held >= WAITS and samples_held < WAITS:
        server_starved = server is not None and (server.starved or 0.0) >= STARVED
        server_busy = server is not None and server.worker["busy"] >= 0.8
        if server_starved or server_busy:
            what = "kept from a core" if server_starved else "busy"
            return Verdict("replay server", f"actors' writes and the learner's samples both wait on the replay "
                                            f"server, {what} ({figures.get('server_starved', 0.0):.0%} of the CPU it "
                                            f"wanted it did not get)",
                           "give the replay server more CPU (its CPU limit, a machine of its own); past one server: "
                           "replay shards", evidence, figures)
    if held >= WAITS:
        return Verdict("replay link", f"actors wait {held:.0%} of their time for the replay server to confirm "
                                      f"their writes while its table is idle "
                                      f"{server.worker['idle'] if server else 0.0:.0%}",
                       "a faster network between actors and the replay server, or actors nearer to it; more "
                       "actors only if the link has room", evidence, figures)
    if pack.starved >= STARVED:
        host = sorted(pack.hosts)[0]
        part, why, change = _machine(obs, host, "actors")
        return Verdict(part, why, change, evidence, figures)
    if shares["policy"] > shares["env"]:
        return Verdict("actor inference", f"actors spend {shares['policy']:.0%} of their time choosing actions, "
                                          f"{shares['env']:.0%} stepping envs",
                       f"more envs per actor (one policy call serves all), or more actors: {more}", evidence,
                       figures)
    return Verdict("actors' envs", f"the learner waits for data {figures['learner_data_wait_share']:.0%} of its "
                                   f"time; actors spend {shares['env']:.0%} of theirs stepping envs",
                   f"more actors (or envs per actor): {more}", evidence, figures)


def _evidence(obs: Observation, pack: _Actors, figures: dict[str, float]) -> list[str]:
    """Lines of figures behind any verdict."""
    shares = pack.shares
    lines = [f"actors: {pack.count}, {pack.per_s:,.0f} transitions/s ({figures['per_actor_unheld_per_s']:,.0f}/s "
             f"each when not held); time: envs {shares['env']:.0%}, policy {shares['policy']:.0%}, "
             f"held by the server {shares['held']:.0%}, weights {shares['weights'] + shares['downloads']:.0%}; "
             f"CPU {pack.cpu:.2f} cores each, kept from a core {pack.starved:.0%}"]
    learner = obs.learner
    if learner is not None:
        lines.append(f"learner: {figures['sgd_steps_per_s']:.0f} SGD steps/s x {learner.levels.get('batch', 0):.0f} "
                     f"= {figures['learner_sampled_per_s']:,.0f} samples/s; trains {learner.share('train_s'):.0%}, "
                     f"waits for data {learner.share('data_wait_s'):.0%}; CPU {learner.cpu:.2f} cores, kept from a "
                     f"core {learner.starved or 0.0:.0%}")
    if obs.server is not None:
        worker = obs.server.worker
        lines.append(f"replay server: CPU {obs.server.cpu:.2f} cores, kept from a core "
                     f"{obs.server.starved or 0.0:.0%}; table worker busy {worker['busy']:.0%}, idle "
                     f"{worker['idle']:.0%}, holding inserts {worker['inserts_held']:.0%}, holding samples "
                     f"{worker['samples_held']:.0%}")
    for evaluator in obs.evaluators:
        lines.append(f"evaluator on {evaluator.host}: busy {evaluator.share('busy_s'):.0%}, CPU "
                     f"{evaluator.cpu:.2f} cores")
    if "policy_lag_steps" in figures:
        lines.append(f"policy lag: {figures['policy_lag_steps']:.0f} train steps "
                     f"({figures['policy_lag_publications']:.1f} publications)")
    return lines
