"""The role registry: one list of roles that the CLI, the forkserver and the configuration reference all read."""

import ast
import importlib.util

from launcher import cli
from launcher.roles import CLI_ENTRY, ROLES, STACK_IMPORTS, load_entry, preload_modules


def test_every_role_is_a_subcommand_with_its_config_flags():
    for role in ROLES.values():
        args = cli._parser().parse_args([role.name, "--seed", "7"])
        assert args.command == role.name and args.seed == "7"


def test_entries_name_functions_that_take_the_config_and_preloads_are_importable():
    """Read from the source (importing every role would start TensorFlow): `def FUNCTION(config...)` exists."""
    for role in ROLES.values():
        module_name, function_name = role.entry.split(":")
        spec = importlib.util.find_spec(module_name)
        assert spec is not None, role.entry
        functions = {node.name: node for node in ast.parse(open(spec.origin, encoding="utf-8").read()).body
                     if isinstance(node, ast.FunctionDef)}
        assert function_name in functions, role.entry
        assert [a.arg for a in functions[function_name].args.args][:1] == ["config"], role.entry
        for module in role.preload:
            assert importlib.util.find_spec(module) is not None, module
    assert load_entry(CLI_ENTRY) is cli.entry


def test_forkserver_preloads_the_stack_then_every_forked_roles_modules():
    modules = preload_modules()
    assert modules[:len(STACK_IMPORTS)] == list(STACK_IMPORTS)
    assert modules[0] == "launcher.forkserver_signals"  # first: SIGTERM is ignored before the slow imports
    assert {"replay_server.server", "learner.train", "actor.collect", "evaluator.evaluate"} <= set(modules)
    assert len(modules) == len(set(modules))
