"""Loading configs: declares documented fields and reads them from CLI flags, DQN_* env vars and JSON files.

A config class is a dataclass whose fields are declared with `setting(...)`. Each field gets
a flag (`--env-id`) and an environment variable (`DQN_ENV_ID`). Precedence, lowest first:
defaults, `--preset`, `--config file.json`, environment, flags. Every value is converted and range-checked
before any process starts; problems raise `ConfigError` naming the field and what is allowed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dqn.errors import BadInput
from dqn.files import atomic_write

ENV_PREFIX = "DQN_"
#: A secret field may instead come from a file named by `DQN_<FIELD>_FILE` (where Docker and Compose mount secrets).
SECRET_FILE_SUFFIX = "_file"


class ConfigError(BadInput, ValueError):
    """A config value that cannot be used; the message names the field and the fix."""

    def __init__(self, field_name: str, message: str):
        self.field_name = field_name
        label = f"{flag_name(field_name)} / {env_name(field_name)}" if field_name else "config"
        super().__init__(f"{label}: {message}")


def setting(default: Any, doc: str, *, ge: float | None = None, gt: float | None = None,
            le: float | None = None, choices: Sequence[Any] | None = None, secret: bool = False) -> Any:
    """Declares a documented config field with optional bounds (`ge`, `gt`, `le`) or `choices`.

    A `secret` field is read from its environment variable (or the file `DQN_<NAME>_FILE` names) only and never
    shown: not in a config's repr, not in `to_dict` (so neither in config.json nor in the run's published settings).
    """
    metadata = {"doc": doc, "ge": ge, "gt": gt, "le": le, "choices": tuple(choices) if choices else None,
                "secret": secret}
    if isinstance(default, list | dict):
        raise TypeError("use tuples for sequence defaults so configs stay immutable")
    return dataclasses.field(default=default, metadata=metadata, repr=not secret)


def secret_fields(config_class: type) -> set[str]:
    """Names of the fields declared `secret` (environment only, never written or shown)."""
    return {f.name for f in dataclasses.fields(config_class) if f.metadata.get("secret")}


def flag_name(field_name: str) -> str:
    """`replay_max_size` -> `--replay-max-size`."""
    return "--" + field_name.replace("_", "-")


def env_name(field_name: str) -> str:
    """`replay_max_size` -> `DQN_REPLAY_MAX_SIZE`."""
    return ENV_PREFIX + field_name.upper()


def field_types(config_class: type) -> dict[str, Any]:
    """Resolved type hints of a config dataclass, by field name."""
    hints = typing.get_type_hints(config_class)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_class)}


def _convert(field_name: str, field_type: Any, raw: Any) -> Any:
    """Converts a raw value (string from a flag/env var, or a JSON value) to the field's type."""
    optional = type(None) in typing.get_args(field_type)
    if optional:
        field_type = next(t for t in typing.get_args(field_type) if t is not type(None))
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none", "null")):
            return None
    origin = typing.get_origin(field_type)
    try:
        if field_type is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if origin is tuple:
            (item_type, *_rest) = typing.get_args(field_type)
            if isinstance(raw, str):
                items = [part for part in raw.replace(" ", "").split(",") if part]
            elif isinstance(raw, list | tuple):
                items = list(raw)
            else:
                raise ValueError
            return tuple(_convert(field_name, item_type, item) for item in items)
        if field_type is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            return int(str(raw).replace("_", "")) if isinstance(raw, str) else int(raw)
        if field_type is float:
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
            if math.isnan(value):
                raise ValueError
            return value
        if field_type is str:
            if not isinstance(raw, str):
                raise ValueError
            return raw
    except (TypeError, ValueError):
        pass
    else:
        raise TypeError(f"unsupported config type {field_type!r} for {field_name}")
    raise ConfigError(field_name, f"expected {_type_label(field_type)}, got {raw!r}")


def _type_label(field_type: Any) -> str:
    if typing.get_origin(field_type) is tuple:
        return "a comma-separated list of integers"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        field_type, str(field_type))


def validate_fields(config: Any) -> None:
    """Checks every field against its declared bounds/choices; raises ConfigError on the first bad one."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        meta = f.metadata
        values = value if isinstance(value, tuple) else (value,)
        for item in values:
            if item is None:
                continue
            if meta.get("choices") and item not in meta["choices"]:
                allowed = ", ".join(map(str, meta["choices"]))
                raise ConfigError(f.name, f"must be one of {allowed}; got {item!r}")
            if meta.get("ge") is not None and item < meta["ge"]:
                raise ConfigError(f.name, f"must be >= {meta['ge']}; got {item!r}")
            if meta.get("gt") is not None and item <= meta["gt"]:
                raise ConfigError(f.name, f"must be > {meta['gt']}; got {item!r}")
            if meta.get("le") is not None and item > meta["le"]:
                raise ConfigError(f.name, f"must be <= {meta['le']}; got {item!r}")
    check = getattr(config, "check", None)
    if check is not None:
        check()


def add_flags(parser: argparse.ArgumentParser, config_class: type) -> None:
    """Adds one flag per field (values stay strings; conversion happens in `resolve`)."""
    parser.add_argument("--config", dest="config_file", default=argparse.SUPPRESS, metavar="FILE.json",
                        help="JSON file of settings (keys are field names; unknown keys are errors)")
    types = field_types(config_class)
    for f in dataclasses.fields(config_class):
        text = (f"{f.metadata['doc']} [{allowed_values(f, types[f.name])}; env {env_name(f.name)}; "
                f"default {format_value(f.default)}]")
        # argparse expands %-placeholders in help; a doc that says "80%" must reach the user as written.
        parser.add_argument(flag_name(f.name), dest=f.name, default=argparse.SUPPRESS, metavar="V",
                            help=text.replace("%", "%%"))


def format_value(value: Any) -> str:
    """A value as it is written in a flag or env var: `none`, `true`, `256,256`."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


def allowed_values(field: dataclasses.Field, field_type: Any) -> str:
    """What a field accepts, from its type, bounds and choices: `integer >= 1`, `one of auto, max`."""
    meta = field.metadata
    args = typing.get_args(field_type)
    optional = type(None) in args
    base = next((t for t in args if t is not type(None)), field_type) if optional else field_type
    if meta.get("choices"):
        return "one of " + ", ".join([*map(format_value, meta["choices"]), *(["none"] if optional else [])])
    listed = typing.get_origin(base) is tuple
    item_type = typing.get_args(base)[0] if listed else base
    text = {int: "integer", float: "number", bool: "true or false", str: "string"}[item_type]
    if listed:
        text = f"comma-separated {text}s"
    inclusive = meta.get("ge") is not None
    low, high = meta["ge"] if inclusive else meta.get("gt"), meta.get("le")
    if low is not None and high is not None:  # an interval: [0, 1] or (0, 1]
        text += f" in {'[' if inclusive else '('}{low:g}, {high:g}]"
    elif low is not None:
        text += f" {'>=' if inclusive else '>'} {low:g}"
    elif high is not None:
        text += f" <= {high:g}"
    return f"{text}, or none" if optional else text


def known_field_names(config_classes: Iterable[type]) -> set[str]:
    """All field names over a set of config classes (the keys a shared file/env block may hold)."""
    return {f.name for cls in config_classes for f in dataclasses.fields(cls)}


def resolve(config_class: type, *, flags: Mapping[str, Any] | None = None,
            environ: Mapping[str, str] | None = None, file_values: Mapping[str, Any] | None = None,
            known_names: set[str] | None = None) -> Any:
    """Builds and validates a config from defaults < file < environment < flags.

    `known_names` are keys accepted in the file and environment although this role ignores them
    (the compose file shares one DQN_* block across roles); anything else is an unknown key.
    """
    types = field_types(config_class)
    accepted = set(types) | (known_names or set())
    values: dict[str, Any] = {}
    for key in secret_fields(config_class) & {*(file_values or {}), *(flags or {})}:
        raise ConfigError(key, f"is read from the environment variable {env_name(key)} only (in containers from a "
                               "Compose or Kubernetes Secret): a flag shows in process lists and a file key is "
                               "copied with the file")
    for key, raw in (file_values or {}).items():
        if key not in accepted:
            raise ConfigError("", f"unknown key {key!r} in config file; known keys: {', '.join(sorted(types))}")
        if key in types:
            values[key] = _convert(key, types[key], raw)
    environ = environ if environ is not None else os.environ
    for var, raw in environ.items():
        if not var.startswith(ENV_PREFIX):
            continue
        key = var[len(ENV_PREFIX):].lower()
        if key.endswith(SECRET_FILE_SUFFIX) and key[:-len(SECRET_FILE_SUFFIX)] in secret_fields(config_class):
            key = key[:-len(SECRET_FILE_SUFFIX)]
            if env_name(key) in environ:
                raise ConfigError(key, f"is set twice, by {env_name(key)} and {var}; keep one")
            raw = read_secret_file(key, var, raw)
        if key not in accepted:
            raise ConfigError("", f"unknown environment variable {var}; remove it or fix the spelling "
                                  f"(valid: {', '.join(env_name(k) for k in sorted(types))})")
        if key in types:
            values[key] = _convert(key, types[key], raw)
    for key, raw in (flags or {}).items():
        values[key] = _convert(key, types[key], raw)
    values = {**preset_values(values.get("preset"), types), **values}  # the preset: lowest layer above defaults
    config = config_class(**values)
    validate_fields(config)
    return config


def preset_values(name: str | None, types: Mapping[str, Any]) -> dict[str, Any]:
    """The converted values of preset `name` for the fields in `types` (other roles' fields are skipped)."""
    if name is None:
        return {}
    from dqn.settings.presets import PRESETS

    if name not in PRESETS:
        raise ConfigError("preset", f"unknown preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}")
    return {key: _convert(key, types[key], raw) for key, raw in PRESETS[name].items() if key in types}


def read_secret_file(key: str, var: str, path: str) -> str:
    """The secret `key` held in the file `path` that variable `var` names, without its trailing newline."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().rstrip("\r\n")
    except OSError as error:
        raise ConfigError(key, f"cannot read the file {path!r} that {var} names ({error.strerror}); mount the "
                               "secret there (Compose: `secrets:`, Kubernetes: a Secret volume) or unset it") from None


def read_config_file(path: str) -> dict[str, Any]:
    """Reads a JSON settings file; a malformed file is a ConfigError naming the path."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ConfigError("", f"config file {path!r} does not exist") from None
    except json.JSONDecodeError as error:
        raise ConfigError("", f"config file {path!r} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError("", f"config file {path!r} must hold a JSON object of settings")
    return data


def to_dict(config: Any) -> dict[str, Any]:
    """Plain JSON-ready dict of a config (tuples become lists), without its secret fields."""
    secret = secret_fields(type(config))
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()
            if k not in secret}


def write_config(config: Any, path: str) -> None:
    """Writes the resolved config as JSON (atomically, so a reader never sees half a file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_write(path) as handle:
        json.dump(to_dict(config), handle, indent=2, sort_keys=True)
        handle.write("\n")

