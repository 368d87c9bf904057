"""`dqn-service`: one console script, one subcommand per role (launcher/roles.py) plus `status`, `probe`, `config`.

Every subcommand validates its whole config (and the env id) before starting anything:
bad input exits 2 with a one-line reason that names the field.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from dqn.process.runtime import quiet_tensorflow

quiet_tensorflow()

# Imported after quieting TF: these modules are light, roles' heavy imports happen lazily below.
from dqn.errors import ServiceError  # noqa: E402
from dqn.settings import loading as config_loading  # noqa: E402
from dqn.settings.config import ALL_CONFIG_CLASSES, actor_dir, role_dir  # noqa: E402
from launcher.roles import ROLES, load_entry  # noqa: E402

#: Roles that resolve the run's auto settings themselves (dqn/resolve.py); every other role adopts the run's.
RESOLVING_ROLES = ("local", "replay-server")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dqn-service", description="Distributed actor-learner DQN service.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for role in ROLES.values():
        sub = commands.add_parser(role.name, help=role.help, description=role.help)
        config_loading.add_flags(sub, role.config_class)
    status = commands.add_parser("status", help="tables, rates, latest train step, role health and the bottleneck "
                                 "verdict")
    status.add_argument("--replay-address", default="localhost:8000", help="host:port of the replay server")
    status.add_argument("--control-address", default=None, help="host:port of the server of the variables and "
                        "learner_requests tables, where not the replay server")
    status.add_argument("--health", action="append", default=[], metavar="NAME=HOST:PORT",
                        help="a role's health endpoint to check (repeatable)")
    status.add_argument("--timeout", type=float, default=5.0, help="seconds per remote call")
    status.add_argument("--root-dir", default=None, help="run directory: also show each role's last progress "
                        "(train step, env steps, env restarts, checkpoint failures) and the replay server's last "
                        "verdict, also when the server is out of reach")
    probe = commands.add_parser("probe", help="grpc.health.v1 check; exit 0 only if SERVING")
    probe.add_argument("address", help="host:port of a role's health endpoint")
    probe.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer")
    check = commands.add_parser("policy-check", help="replay an exported policy on new episodes; print its returns "
                                "as one JSON line")
    check.add_argument("policy_dir", help="a SavedModel policy, e.g. runs/cartpole/evaluator/best_policy")
    check.add_argument("--env-id", default=None, help="gymnasium env id the policy was trained on; default: the "
                       "run's, from the config.json beside the policy (whose env settings are always used)")
    check.add_argument("--episodes", type=int, default=50, help="episodes to play, one env each")
    check.add_argument("--seed", type=int, default=12_345, help="env i starts from seed + i (keep it apart from the "
                       "run's evaluation seeds)")
    config = commands.add_parser("config", help="print the configuration reference or a role's resolved settings")
    shown = config.add_mutually_exclusive_group(required=True)
    shown.add_argument("--markdown", action="store_true", help="every setting of every role as Markdown tables")
    shown.add_argument("--json", metavar="ROLE", choices=sorted(ROLES),
                       help="ROLE's settings resolved from defaults, --config FILE and DQN_* variables, as JSON")
    config.add_argument("--config", dest="config_file", metavar="FILE.json", help="JSON file of settings")
    config.add_argument("--resolved", action="store_true", help="with --json: also decide the settings left at auto "
                        "from the env, as a run would (plays the env once at random)")
    return parser


def role_subdir(command: str, config: Any) -> tuple[str, ...]:
    """Sub-directory of the run root that holds a role's logs, summaries and resolved config."""
    if command == "local":
        return ()
    if command == "actor":
        return (actor_dir(config.actor_id),)
    return (role_dir(command),)


def load_config(config_class: type, flags: dict[str, Any]) -> Any:
    """Resolves a role's config from flags, DQN_* environment and an optional --config file."""
    file_values = config_loading.read_config_file(flags.pop("config_file")) if "config_file" in flags else None
    return config_loading.resolve(config_class, flags=flags, file_values=file_values,
                                  known_names=config_loading.known_field_names(ALL_CONFIG_CLASSES))


def _print_config(args: argparse.Namespace) -> int:
    """`dqn-service config`: the Markdown reference, or one role's resolved settings as JSON."""
    if args.markdown:
        from launcher.config_reference import markdown

        print(markdown(), end="")
        return 0
    try:
        flags = {"config_file": args.config_file} if args.config_file else {}
        config = load_config(ROLES[args.json].config_class, flags)
        if args.resolved:
            from dqn.process.runtime import setup_logging
            from dqn.resolve import resolve_settings

            setup_logging("config")  # each auto setting says in one line what it chose and why
            config = resolve_settings(config)
    except ServiceError as error:
        print(f"dqn-service config: error: {error}", file=sys.stderr)
        return error.exit_code
    print(json.dumps(config_loading.to_dict(config), indent=2, sort_keys=True))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "probe":
        from dqn.process.health import check

        status = check(args.address, args.timeout)
        print(status)
        return 0 if status == "SERVING" else 1
    if args.command == "status":
        from launcher.status import print_status

        return print_status(args.replay_address, dict(h.split("=", 1) for h in args.health if "=" in h),
                            args.timeout, root_dir=args.root_dir, control_address=args.control_address)
    if args.command == "policy-check":
        import json

        from dqn.model.policy_export import policy_check

        print(json.dumps(policy_check(args.policy_dir, args.env_id, args.episodes, args.seed)), flush=True)
        return 0
    if args.command == "config":
        return _print_config(args)
    role = ROLES[args.command]
    flags = {k: v for k, v in vars(args).items() if k != "command"}
    from dqn.process.runtime import setup_logging

    try:
        config = load_config(role.config_class, flags)
        if args.command == "local":  # the roles' imports run in the forkserver while the checks below run here
            from launcher.forked import start_forkserver

            start_forkserver(config.isolate_network)
        if getattr(config, "actor_id", 0) < 0:  # replicas share one config: give each a stable id of its own
            config = dataclasses.replace(config, actor_id=config.resolved_actor_id())
        setup_logging(args.command)  # before auto settings are decided: each says in one line what it chose
        if args.command not in RESOLVING_ROLES:
            from dqn.resolve import adopt_from_server

            config = adopt_from_server(config, times_learner=args.command == "learner")
            config_loading.write_config(config, config.path(*role_subdir(args.command, config), "config.json"))
        return int(load_entry(role.entry)(config) or 0)
    except ServiceError as error:
        print(f"dqn-service {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code


def entry(argv: Sequence[str] | None = None) -> None:
    """Console-script entry: main(), then an immediate process exit once output is flushed.

    A role's work is saved before main() returns (checkpoints written, summaries and Reverb writers
    flushed). Normal interpreter teardown would then run C++ static destructors while Reverb/gRPC
    threads abandoned under a deadline may still be alive; that race aborts the process ("terminate
    called without an active exception", exit -6) even though the role stopped cleanly. An exception that escapes
    main() is printed and exits 1 the same way: interpreter teardown would join the forked roles' processes.
    """
    try:
        code = main(argv)
    except SystemExit as exit_request:  # argparse: --help, or a usage error
        code = exit_request.code if isinstance(exit_request.code, int) else (0 if exit_request.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported here; teardown could wait on multiprocessing children for good
        traceback.print_exc()
        code = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
