"""The configuration reference (`dqn-service config --markdown` > docs/configuration.md), generated from the code.

One table per group of settings: those every role reads, then those each role adds. Each row gives the flag, the
environment variable, the default, the accepted values, the one-line help and the roles that read the setting.
"""

from __future__ import annotations

import collections
import dataclasses
import re

from dqn.settings.config import CommonConfig
from dqn.settings.loading import allowed_values, env_name, field_types, flag_name, format_value
from launcher.roles import ROLES

COMMAND = "dqn-service config --markdown > docs/configuration.md"

HEADER = f"""# Configuration reference

Generated from `dqn/settings/common.py` and `dqn/settings/config.py` by `{COMMAND}`; do not edit it by hand.

Every setting is a flag (`--env-id`), an environment variable (`DQN_ENV_ID`) and a key of a `--config` JSON
file (`env_id`). Precedence, lowest first: the defaults below, `--preset`, the `--config` file, `DQN_*`
variables, flags. A role ignores `DQN_*` variables and file keys that only other roles read, and rejects
names that no role reads. `dqn-service config --json ROLE` prints a role's settings as resolved from the
defaults, a `--config` file and the environment. Defaults and where they come from: [defaults.md](defaults.md).
"""


def _cell(text: str) -> str:
    """Text safe in a table cell: pipes escaped, `<root_dir>` not taken for an HTML tag."""
    return re.sub(r"<(?=[A-Za-z/])", "&lt;", text.replace("|", "\\|"))


def _default(name: str, roles: list[str]) -> str:
    """The default, or each role's where they differ (a port some roles enable by default, say)."""
    values = {role: format_value(_field(role, name).default) for role in roles}
    counts = collections.Counter(values.values())
    if len(counts) == 1:
        return f"`{values[roles[0]]}`"
    usual = counts.most_common(1)[0][0]
    return "; ".join([*(f"`{v}` ({role})" for role, v in values.items() if v != usual), f"`{usual}` (others)"])


def _field(role: str, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(ROLES[role].config_class) if f.name == name)


def markdown() -> str:
    """The whole reference as Markdown, ending with a newline."""
    readers: dict[str, list[str]] = {}  # setting -> roles whose config has it, in registry order
    first_role: dict[str, str] = {}
    for role in ROLES.values():
        for f in dataclasses.fields(role.config_class):
            readers.setdefault(f.name, []).append(role.name)
            first_role.setdefault(f.name, role.name)
    common = {f.name for f in dataclasses.fields(CommonConfig)}
    sections = [("Settings every role reads", [n for n in readers if n in common])]
    for role in ROLES.values():
        names = [n for n in readers if n not in common and first_role[n] == role.name]
        if names:
            sections.append((f"`{role.name}`: {role.help}", names))
    lines = [HEADER]
    for title, names in sections:
        lines += [f"## {title}", "", "| flag | environment variable | default | values | roles | meaning |",
                  "|---|---|---|---|---|---|"]
        for name in names:
            roles = readers[name]
            field = _field(roles[0], name)
            values = allowed_values(field, field_types(ROLES[roles[0]].config_class)[name])
            who = "all" if len(roles) == len(ROLES) else ", ".join(roles)
            lines.append(f"| `{flag_name(name)}` | `{env_name(name)}` | {_default(name, roles)} | {_cell(values)} "
                         f"| {who} | {_cell(field.metadata['doc'])} |")
        lines.append("")
    return "\n".join(lines)
