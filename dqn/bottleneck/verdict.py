"""`judge`: which part limits the run now, from the roles' windows (dqn/bottleneck/reports.py). Pure: no I/O.

The replay table's rate limiter keeps actors and learner at `samples_per_insert`, so the faster side waits for the
slower one. Actors held back by the server while Reverb's table worker holds their inserts: the learner's side is
short. A learner waiting for data the worker holds back: the actors' side. Writes or samples that wait while the
rate limiter holds neither wait on the replay server (where it lacks CPU: its quota or its cores; or the core
this run's evaluator or own roles take from it) or on the link to it. Weights fetched back to back limit the
actors' policy: the weight transfer. Within a side, the roles' own seconds name the part (the learner's train
step; the actors' env steps, policy calls or item writes), unless the role waits for a core that this run's
evaluator takes or that this run's own roles fill. Work outside the run slows every role alike and leaves the
sides as they are, so it names no part by itself.

A side is short when the other waits on it half its time or more (their speeds differ by 2x or more); a run where
neither side is short and no role waits for the run's own CPU is "balanced".
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from dqn.bottleneck.reports import RoleWindow, ServerWindow

#: The parts a verdict names.
PARTS = ("learner", "replay server", "replay link", "actors' envs", "actor inference", "actor writes",
         "weight transfer", "evaluator", "machine's cores", "balanced", "warming up")
#: A side that waits on the other at least this share of its time is the faster one by 2x or more: the other is short.
WAITS = 0.5
#: A role kept from a core at least this share of the CPU it wanted is limited by its machine.
STARVED = 0.4
#: Actors whose weights are this many publications behind the learner: weights cannot travel as often as published.
STALE_PUBLICATIONS = 4.0
#: A process whose CPU quota holds it back at least this share of the time is short of CPU by its limit.
THROTTLED = 0.25
#: A machine whose cores this run's own roles use to at least this share is filled by the run.
FILLED = 0.8
#: An evaluator that takes at least this share of the CPU this run's roles get on a machine where a limiting role
#: waits for a core takes that core (a share, not cores: work outside the run leaves the run less of the machine).
EVALUATOR_SHARE = 1 / 3


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
        lags = [learner.levels["train_step"] + sgd * (_wall_gap(learner, a)) - a.levels["weights_step"]
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


def _wall_gap(learner: RoleWindow, actor: RoleWindow) -> float:
    """Seconds from the learner's newest report to the actor's, by their senders' clocks (kept within a window)."""
    return max(-learner.seconds, min(learner.seconds, actor.wall - learner.wall))


def _host_use(obs: Observation, host: str) -> tuple[float, float]:
    """(cores this run's roles use on `host`, its usable cores) from the windows of the roles there."""
    windows = [w for w in (obs.learner, *obs.actors, *obs.evaluators, obs.server) if w is not None and w.host == host]
    return sum(w.cpu for w in windows), max((w.cores for w in windows), default=0.0)


def _kept_from_cores(obs: Observation, host: str, who: str, starved: float) -> tuple[str, str, str] | None:
    """(part, why, change) when `who` on `host` waits for a core that this run's own roles take, else None.

    The evaluator where it takes a core there; the machine where this run's roles fill it. Work outside the run
    slows every role alike and leaves which side is short as it was, so it alone names no part (the evidence says
    how busy the machine is).
    """
    if starved < STARVED:
        return None
    used, cores = _host_use(obs, host)
    evaluator_cpu = sum(e.cpu for e in obs.evaluators if e.host == host)
    if used > 0 and evaluator_cpu >= EVALUATOR_SHARE * used:
        return ("evaluator", f"the evaluator takes {evaluator_cpu:.2f} of the {used:.2f} cores this run's roles get "
                             f"on {host}, where the {who} gets {1 - starved:.0%} of the CPU it wants",
                "evaluate less often (--eval-interval, --eval-episodes) or run the evaluator on another machine")
    if cores <= 0 or used < FILLED * cores:
        return None
    return ("machine's cores", f"this run's roles use {used:.1f} of the {cores:g} cores of {host} and the {who} gets "
                               f"{1 - starved:.0%} of the CPU it wants",
            "more cores for that machine, or move roles (actors, the evaluator) to another one")


def judge(obs: Observation) -> Verdict:
    """The part that limits the run now, with its evidence, the change that would move it and the capacity figures."""
    actors, learner, server = obs.actors, obs.learner, obs.server
    if learner is None or not actors or any(a.levels.get("warming_up", 0) for a in actors):
        missing = "the learner's reports" if learner is None else "the actors' reports" if not actors else \
            "the actors' warm-up to end"
        return Verdict("warming up", f"waiting for {missing}", "", [], {})
    if learner.levels.get("finished"):
        return Verdict("learner", f"it has finished: max_train_steps reached at train step "
                                  f"{learner.levels.get('train_step', 0):.0f}; actors wait for it for good",
                       "a longer run (--max-train-steps), or stop the run", [], {})
    pack = _Actors.of(actors)
    figures = _figures(obs, pack)
    evidence = _evidence(obs, pack, figures)
    shares = pack.shares
    held, data_wait = shares["held"], learner.share("data_wait_s")
    inserts_held = server.worker["inserts_held"] if server else 0.0
    samples_held = server.worker["samples_held"] if server else 0.0

    def verdict(part: str, why: str, change: str) -> Verdict:
        return Verdict(part, why, change, evidence, figures)

    if server is not None and server.filling:
        return verdict("warming up", f"the replay table fills to the learner's minimum ({server.filling})", "")
    if shares["no_weights"] >= WAITS:
        return verdict("warming up", f"actors wait for the learner's first weights ({shares['no_weights']:.0%} of "
                                     "their time)", "")
    # Writes or samples that wait while the rate limiter holds neither: the server, or the way to it.
    on_server = ((held >= WAITS and inserts_held < WAITS / 2) or
                 (data_wait >= WAITS and held < WAITS and samples_held < WAITS / 2))
    waits = f"actors wait {held:.0%} of their time on writes, the learner {data_wait:.0%} on data"
    if on_server and (why := _server_limited(obs)):
        return verdict("replay server", f"{waits}, and the replay server {why}",
                       "give the replay server more CPU (its CPU limit, a machine of its own); past one server: "
                       "replay shards")
    if on_server and server is not None and (kept := _kept_from_cores(obs, server.host, "replay server",
                                                                      server.starved or 0.0)):
        return verdict(*kept)
    fetching, stale = shares["downloads"] + shares["weights"], figures.get("policy_lag_publications", 0.0)
    # Stale weights alone may only mean actors seldom ask (held back, or a slow loop): the transfer limits when it
    # runs most of the time, or runs a good share of it and still falls publications behind.
    if fetching >= WAITS or (stale >= STALE_PUBLICATIONS and fetching >= WAITS / 2):
        return verdict("weight transfer", f"actors fetch and swap weights {fetching:.0%} of their time and act on "
                                          f"weights {stale:.1f} publications behind the learner "
                                          f"({figures.get('mb_per_weight_pull', 0.0):.1f} MB a pull, "
                                          f"{figures.get('weight_pulls_per_s', 0.0):.0f} pulls/s)",
                       "publish less often (--publish-interval), refresh less often (--weights-refresh-interval-s), "
                       "or a smaller network; past one server: weights relays")
    if on_server:
        idle = server.worker["idle"] if server else 0.0
        return verdict("replay link", f"{waits}, while the replay server's table is idle {idle:.0%} of the time and "
                                      "the server is not short of CPU",
                       "a faster network between the roles and the replay server, or the roles nearer to it")
    # From here the rate limiter holds whichever side waits: held actors wait for the learner (even where the
    # learner waits for its own input pipeline too), a learner waiting for data waits for the actors.
    if held >= WAITS:
        kept = _kept_from_cores(obs, learner.host, "learner", learner.starved or 0.0)
        if kept:
            return verdict(*kept)
        spi = obs.samples_per_insert
        return verdict("learner", f"actors are held back {held:.0%} of their time until the learner samples "
                                  f"(replay ratio {spi:g}); the learner trains {learner.share('train_s'):.0%} of its "
                                  "time", _learner_change(spi, figures["actors_before_learner_binds"], pack.count))
    if data_wait >= WAITS:
        return _actors_short(obs, pack, verdict, data_wait, figures["actors_before_learner_binds"])
    # Neither side waits on the other: both may still wait for cores that this run's own roles take.
    kept = (_kept_from_cores(obs, learner.host, "learner", learner.starved or 0.0)
            or _kept_from_cores(obs, sorted(pack.hosts)[0], "actors", pack.starved))
    if kept:
        return verdict(*kept)
    return verdict("balanced", f"actors are held back {held:.0%} of their time, the learner waits for data "
                               f"{data_wait:.0%} of its time",
                   f"≈{figures['actors_before_learner_binds']:.1f} actors keep the learner busy, {pack.count} run")


def _server_limited(obs: Observation) -> str | None:
    """Why the replay server itself is short of CPU, or None: its CPU limit, or all its cores busy.

    Waiting on a run queue is the machine's matter (`_kept_from_cores`): work outside the run slows every role
    alike, the server's many threads most of all.
    """
    server = obs.server
    if server is None:
        return None
    if (server.throttled or 0.0) >= THROTTLED:
        return f"is held back by its CPU limit {server.throttled:.0%} of the time (it uses {server.cpu:.2f} cores)"
    if server.cpu >= FILLED * server.cores:
        return f"uses {server.cpu:.1f} of its {server.cores:g} cores"
    return None


def _learner_change(spi: float, enough: float, count: int) -> str:
    lower = f"a lower replay ratio (--samples-per-insert {spi / 2:g} lets the learner use twice the data)" \
        if spi > 1 else "a faster learner"
    return (f"{lower}, a faster learner (GPU, --train-steps-per-call), or fewer actors: "
            f"≈{enough:.1f} keep it busy, {count} run")


def _actors_short(obs: Observation, pack: _Actors, verdict, data_wait: float, enough: float) -> Verdict:
    """The learner waits for data the rate limiter holds back: which part of the actors' work is short."""
    shares = pack.shares
    kept = _kept_from_cores(obs, sorted(pack.hosts)[0], "actors", pack.starved)
    if kept:
        return verdict(*kept)
    work = {"actors' envs": ("stepping envs", shares["env"]),
            "actor inference": ("choosing actions", shares["policy"]),
            "actor writes": ("writing items", shares["write"])}
    part = max(work, key=lambda name: work[name][1])
    why = (f"the learner waits for data {data_wait:.0%} of its time; actors spend "
           + ", ".join(f"{share:.0%} {what}" for what, share in sorted(work.values(), key=lambda w: -w[1])))
    more = f"≈{enough:.1f} actors keep the learner busy, {pack.count} run"
    change = {"actors' envs": f"more actors, or more envs per actor: {more}",
              "actor inference": f"more envs per actor (one policy call serves them all), or more actors: {more}",
              "actor writes": f"more envs per item (--envs-per-item: one write serves them all), or more actors: "
                              f"{more}"}[part]
    return verdict(part, why, change)


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
    for host in sorted({w.host for w in (obs.learner, *obs.actors, *obs.evaluators, obs.server) if w is not None}):
        used, cores = _host_use(obs, host)
        loads = [w.load1 for w in (obs.learner, *obs.actors, *obs.evaluators, obs.server)
                 if w is not None and w.host == host and w.load1 is not None]
        load = f", load {max(loads):.1f}" if loads else ""
        lines.append(f"machine {host}: {cores:g} cores{load}; this run's roles there use {used:.2f}")
    if "policy_lag_steps" in figures:
        lines.append(f"policy lag: {figures['policy_lag_steps']:.0f} train steps "
                     f"({figures['policy_lag_publications']:.1f} publications)")
    return lines
