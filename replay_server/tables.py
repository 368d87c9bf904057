"""The check that a table restored from a checkpoint still matches the configured one (dqn/replay_layout/ builds it)."""

from __future__ import annotations

from typing import Any

import reverb


def table_mismatches(expected: list[reverb.Table], running: dict[str, Any]) -> list[str]:
    """Differences between the configured tables and what the server runs (after a restore).

    Reverb silently keeps a checkpoint's table config (size, limiter, signature); this makes it visible. Auto
    settings do not drift between starts of a run: the replay server keeps what the run decided first
    (`dqn.resolve.resolve_run`).
    """
    problems = []
    for table in expected:
        expected_info = table.info
        info = running.get(table.name)
        if info is None:
            problems.append(f"table {table.name!r} missing")
            continue
        if info.max_size != expected_info.max_size:
            problems.append(f"{table.name}.max_size is {info.max_size} items in the checkpoint, "
                            f"{expected_info.max_size} in the config")
        if info.signature != expected_info.signature:
            problems.append(f"{table.name}.signature differs (the checkpoint was written for another env or "
                            "network, or by a version of the service whose items had other fields)")
        if info.sampler_options != expected_info.sampler_options:
            problems.append(f"{table.name}.sampler is {_sampler_name(info)} in the checkpoint, "
                            f"{_sampler_name(expected_info)} in the config")
        for key in ("samples_per_insert", "min_size_to_sample"):
            got = getattr(info.rate_limiter_info, key)
            want = getattr(expected_info.rate_limiter_info, key)
            if abs(got - want) > 1e-9:
                problems.append(f"{table.name}.rate_limiter.{key} is {got} in the checkpoint, {want} in the config")
    return problems


def _sampler_name(info: Any) -> str:
    options = info.sampler_options
    if options.HasField("prioritized"):
        return f"prioritized(alpha={options.prioritized.priority_exponent:g})"
    return "uniform" if options.uniform else str(options).strip()
