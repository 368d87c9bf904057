"""The resolve step: a run's settings with nothing left at auto, decided once from one bout of random play.

Four settings follow from the env when left at auto (`AUTO_FROM_ENV` in dqn/settings/common.py): the observation
history, the image encoding, the replay ratio and where the mask of valid actions is read.
The mask is decided here, not where every role makes the env's specs, because an info mask shows only when the env is
reset, and roles must not play the env: every role then makes the same specs from the published setting.
`resolve_settings` plays the env once (dqn/envs/random_play.py), hands every step to the rules that need it and returns
the settings with each decided, saying in one log line per setting what it chose and why. A run resolves once: `local`
before its roles start, the replay server when roles are started apart; the replay server publishes the run's settings
(dqn/remote/run_settings.py) and every other role adopts them (`adopt_run_settings`), so all roles use exactly the same
values however they are started. `DqnBuilder` is handed resolved settings and the env's specs and never plays.

The replay ratio of a slow env also depends on how fast the learner trains, which is measured on the learner's own
machine: `local` times it here (its learner runs here); a replay server started apart passes a `learner_speed`
that asks the run's learner to time itself (replay_server/learner_speed.py, `adopt_from_server(times_learner=True)`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from dqn.envs.action_masks import MaskSeen, action_mask_for
from dqn.envs.hidden_state import PlayedTransitions, observation_history_for, probed_inputs
from dqn.envs.image_codes import LargestImageValues, image_encoding_for
from dqn.envs.making import EnvOptions, EnvSpecs, env_specs
from dqn.envs.random_play import PROBE_BUDGET_S, PROBE_STEPS, StepTimes, probe_env
from dqn.envs.spaces import EnvError
from dqn.errors import BadInput
from dqn.model.networks import check_network_input
from dqn.remote.run_settings import report_learner_speed, wait_for_run_settings
from dqn.replay_layout.items import ItemShape
from dqn.replay_layout.tables import SLOW_STEP_SECONDS, auto_samples_per_insert
from dqn.settings.common import AUTO_FROM_ENV
from dqn.settings.loading import ConfigError, read_config_file, write_config

log = logging.getLogger(__name__)
#: (settings resolved but for the replay ratio, the env's specs) -> (the learner's seconds per sample, where timed).
LearnerSpeed = Callable[[Any, EnvSpecs], tuple[float, str]]


def run_env_specs(config) -> EnvSpecs:
    """The specs of the run's env as every role makes it (observation_history must be resolved)."""
    return env_specs(config.env_id, EnvOptions.from_config(config))


def resolve_run(config, record_path: str, learner_speed: LearnerSpeed | None = None):
    """The run's settings, recorded at `record_path`: auto ones as an earlier start of the run decided them, if any.

    A restarted replay server or `local` on the same run directory keeps what the run decided at its first start:
    its replay checkpoint was written with those settings, and random play timed again might round the other way.
    Any other recorded value gives way to this start's, as every explicit setting does. That includes a value an
    older version decided from the env and that is a plain setting now (`action_gap_alpha`): it shapes only the
    learner's targets, which no checkpoint depends on, so such a record loads and is rewritten with this start's.
    """
    recorded = read_config_file(record_path) if os.path.exists(record_path) else {}
    if recorded.get("env_id") == config.env_id:
        kept = {name: recorded[name] for name in config.unresolved() if recorded.get(name, AUTO_FROM_ENV[name])
                != AUTO_FROM_ENV[name]}
        for name, value in kept.items():
            _say(name, value, f"as this run decided at an earlier start, recorded in {record_path}")
        config = dataclasses.replace(config, **kept)
    config = resolve_settings(config, learner_speed)
    write_config(config, record_path)
    return config


def resolve_settings(config, learner_speed: LearnerSpeed | None = None):
    """`config` with every setting of AUTO_FROM_ENV decided; explicit values are kept and nothing is played for them.

    Errors of the env id (unknown, unsupported spaces) and settings that do not fit the env raise; an env that fails
    in random play leaves each rule at its safe choice, with a warning. `learner_speed` times the learner for a
    slow env's replay ratio (default: here, `time_learner_here`).
    """
    auto = config.unresolved()
    if not auto:
        specs = run_env_specs(config)
        check_network_input(config, specs.observation, specs.action)
        return config
    # What the env shows of itself: unstacked, and its mask where it gives one, not yet in the observation.
    options = EnvOptions.from_config(config, observation_history=1, action_mask="none")
    plain = env_specs(config.env_id, options)
    played = _watchers(auto, plain, config.action_mask_key)
    try:
        if played:
            # Only the mask's source wanted: the first reset shows it.
            steps = 0 if list(played) == ["mask"] else PROBE_STEPS
            probe_env(config.env_id, options, config.env_call_timeout_s, config.seed, played.values(),
                      budget_s=PROBE_BUDGET_S, max_steps=steps,
                      mask_key=None if config.action_mask == "none" else config.action_mask_key)
    except BadInput as error:  # a mask that does not fit the action space: the user's to fix, at start
        raise EnvError(f"env {config.env_id!r}: {error}") from None
    except Exception as error:  # noqa: BLE001 - the user's env; the actors report its faults where they matter
        log.warning("auto settings: random play failed (%s: %s); each takes its safe choice", type(error).__name__,
                    error)
        played = {}
    if "action_mask" in auto:
        source, why = action_mask_for(plain.observation, config.action_mask_key, played.get("mask"))
        config = dataclasses.replace(config, action_mask=source)
        _say("action_mask", source, why)
    if "observation_history" in auto:
        history, why = observation_history_for(plain.observation, plain.action, played.get("transitions"))
        config = dataclasses.replace(config, observation_history=history)
        _say("observation_history", history, why)
    specs = run_env_specs(config)
    if "image_encoding" in auto:
        encoding, why = image_encoding_for(specs.observation, played.get("images"))
        config = dataclasses.replace(config, image_encoding=encoding)
        if why is not None:
            _say("image_encoding", encoding, why)
    # Before the learner is timed with a network that cannot fit.
    check_network_input(config, specs.observation, specs.action)
    if "samples_per_insert" in auto:
        ratio = _replay_ratio(config, specs, played.get("steps"), learner_speed or time_learner_here)
        config = dataclasses.replace(config, samples_per_insert=ratio)
    return config


def _watchers(auto: list[str], plain: EnvSpecs, mask_key: str) -> dict[str, Any]:
    """The observers of random play that the auto settings need, by name (none: nothing needs playing)."""
    watchers: dict[str, Any] = {}
    if "action_mask" in auto:  # sees the first reset's info, and checks the size of every mask it meets
        watchers["mask"] = MaskSeen(mask_key, plain.actions)
    if "observation_history" in auto and probed_inputs(plain.observation, plain.action) is None:
        watchers["transitions"] = PlayedTransitions()
    if "image_encoding" in auto:
        images = LargestImageValues(plain.observation)
        if images.watching:
            watchers["images"] = images
    if "samples_per_insert" in auto:
        watchers["steps"] = StepTimes()
    return watchers


def _replay_ratio(config, specs: EnvSpecs, steps: StepTimes | None, learner_speed: LearnerSpeed) -> float:
    """samples_per_insert auto: from the env's median step and, for a slow env, the learner's speed."""
    step_s = steps.median() if steps is not None else None
    if step_s is None:
        ratio = auto_samples_per_insert(0.0, None)
        _say("samples_per_insert", ratio, "the env's step could not be timed")
        return ratio
    if step_s < SLOW_STEP_SECONDS:
        ratio = auto_samples_per_insert(step_s, None)
        _say("samples_per_insert", ratio, f"an env step takes {step_s * 1e3:.3g} ms, below "
                                          f"{SLOW_STEP_SECONDS * 1e3:g} ms")
        return ratio
    learner_s, where = learner_speed(config, specs)
    ratio = auto_samples_per_insert(step_s, learner_s)
    _say("samples_per_insert", ratio, f"an env step takes {step_s * 1e3:.3g} ms; the learner's SGD step takes "
                                      f"{learner_s * 1e6:.3g} us a sample {where}")
    return ratio


def time_learner_here(config, specs: EnvSpecs) -> tuple[float, str]:
    """The run's agent timed on this machine: (seconds per sample, "on this machine (host)")."""
    from dqn.model.train_speed import seconds_per_sample  # builds and traces an agent: only for slow envs

    shape = ItemShape.from_config(config)
    # A replay server's settings hold no batch size: it times the learner at the default one.
    batch = config.train_batch_size() if hasattr(config, "train_batch_size") else config.auto_batch_size()
    seconds = seconds_per_sample(config, specs.observation, specs.action, batch, shape.sequence_length)
    return seconds, f"on this machine ({socket.gethostname()})"


def _say(name: str, value: Any, why: str) -> None:
    log.info("%s auto: %s (%s)", name, value, why)


def adopt_run_settings(config, published: dict[str, Any], source: str):
    """`config` with its auto settings taken from the run's published ones; an explicit value must agree.

    A value set for one role that differs from the run's would give that role another network, another env or
    other targets than the rest: a ConfigError naming the setting and the fix. Only the settings of AUTO_FROM_ENV
    are taken: every other published value, also one an older version decided from the env (`action_gap_alpha`),
    leaves the role's own in place.
    """
    decided = {}
    for name, auto in AUTO_FROM_ENV.items():
        if name not in published:
            raise ConfigError(name, f"the run's settings at {source} do not say it: is the replay server there a "
                                    "version of this service?")
        theirs, mine = published[name], getattr(config, name)
        if mine == auto:
            decided[name] = theirs
        elif mine != theirs:
            raise ConfigError(name, f"is {mine} here, but the run's settings at {source} say {theirs}: give every "
                                    "role the same value, or leave it at auto here to take the run's")
    return dataclasses.replace(config, **decided)


def adopt_from_server(config, times_learner: bool = False):
    """`config` with the run's settings as the replay server publishes them (a role started apart from the run).

    The env id is checked first, so a bad one fails at once instead of after waiting for the server. The learner
    (`times_learner`) answers settings still pending with its SGD step's speed on this machine.
    """
    env_specs(config.env_id, EnvOptions.from_config(config, observation_history=1, action_mask="none"))
    address = config.control_address_resolved()
    source = f"the replay server at {address}"

    def report_speed(client, pending: dict[str, Any]) -> None:
        adopted = adopt_run_settings(config, pending, source)
        seconds, where = time_learner_here(adopted, run_env_specs(adopted))
        log.info("samples_per_insert: the replay server waits for this learner's speed; its SGD step takes %.3g us "
                 "a sample %s", seconds * 1e6, where)
        report_learner_speed(client, seconds, socket.gethostname(), config.rpc_timeout_s)

    published = wait_for_run_settings(address, config.connect_timeout_s, config.rpc_timeout_s,
                                      replay_too=address == config.replay_address,
                                      on_pending=report_speed if times_learner else None)
    config = adopt_run_settings(config, published, source)
    specs = run_env_specs(config)
    check_network_input(config, specs.observation, specs.action)
    return config


def resolved_builder(config):
    """The `DqnBuilder` of `config` after resolving it: for code that builds parts outside a run (tests, benches)."""
    from dqn.builder import DqnBuilder

    config = resolve_settings(config)
    return DqnBuilder(config, run_env_specs(config))
