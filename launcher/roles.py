"""The role registry: every `dqn-service` role, its config class, entry point and what it imports.

The CLI builds one subcommand per entry; `local`'s forkserver preloads the modules listed here; the
configuration reference (`dqn-service config --markdown`) says which roles read each setting. This module
imports only the light config classes, so every launcher module may import it without a cycle.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from dqn.settings.config import ActorConfig, EvaluatorConfig, LearnerConfig, LocalConfig, ReplayServerConfig


@dataclasses.dataclass(frozen=True)
class Role:
    """One subcommand: `entry` ("module:function") runs the role with its resolved config, returns an exit code."""

    name: str
    config_class: type
    entry: str
    help: str
    preload: tuple[str, ...] = ()  # imported once in `local`'s forkserver before roles are forked from it


ROLES: dict[str, Role] = {role.name: role for role in (
    Role("replay-server", ReplayServerConfig, "replay_server.server:serve",
         "Reverb server with the replay and variables tables", ("replay_server.server",)),
    Role("learner", LearnerConfig, "learner.train:run",
         "trains the DqnAgent from replay and publishes its weights", ("learner.train",)),
    Role("actor", ActorConfig, "actor.collect:run",
         "steps N envs with an epsilon-greedy policy and writes their transitions to replay (by default one item "
         "per block of 16 envs)", ("actor.collect",)),
    Role("evaluator", EvaluatorConfig, "evaluator.evaluate:run",
         "runs greedy-policy episodes on new weights and records their average return", ("evaluator.evaluate",)),
    Role("local", LocalConfig, "launcher.local:run", "the whole topology as separate processes on this machine"),
)}

#: The CLI's entry, which each forked role runs with its argv (named here so launcher/forked.py needs no import
#: of launcher/cli.py, which imports it).
CLI_ENTRY = "launcher.cli:entry"

#: What every role imports before its first op. The forkserver ignores SIGTERM (launcher/forkserver_signals.py).
STACK_IMPORTS = ("launcher.forkserver_signals", "tensorflow", "reverb", "tf_agents.agents.dqn.dqn_agent",
                 "gymnasium", "grpc")


#: Imported first in the forkserver of a run that isolates its network: it moves the forkserver, and so every role,
#: into a network namespace of its own.
NETWORK_IMPORT = "launcher.forkserver_network"


def preload_modules(isolate_network: bool = False) -> list[str]:
    """The forkserver's imports: the private network (if asked), the ML stack, then each role's own modules."""
    network = [NETWORK_IMPORT] if isolate_network else []
    return [*network, *STACK_IMPORTS, *(module for role in ROLES.values() for module in role.preload)]


def load_entry(target: str) -> Callable[..., Any]:
    """The function a "module:function" string names (imported on first use)."""
    module_name, function_name = target.split(":")
    return getattr(importlib.import_module(module_name), function_name)
