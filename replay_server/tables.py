"""The two Reverb tables, built from config, and the check that a restored table still matches it."""

from __future__ import annotations

from typing import Any

import reverb

from dqn.agent import AgentBundle, replay_signature, variables_signature
from dqn.config import CommonConfig
from dqn.replay import REPLAY_TABLE, VARIABLES_TABLE


def replay_rate_limiter(config: CommonConfig) -> reverb.rate_limiters.RateLimiter:
    """MinSize, or SampleToInsertRatio when samples_per_insert > 0 (keeps actors and learner in step).

    Counted in items; with block items every item holds envs_per_item transitions, so samples per insert
    means the same per transition.
    """
    min_items = config.replay_items(config.replay_min_size)
    if config.samples_per_insert <= 0:
        return reverb.rate_limiters.MinSize(min_items)
    spi = config.samples_per_insert
    # Reverb needs the allowed window to hold at least 2 * max(1, spi) or it can deadlock.
    error_buffer = max(config.samples_per_insert_tolerance * min_items * spi, 2.0 * max(1.0, spi))
    return reverb.rate_limiters.SampleToInsertRatio(spi, min_items, error_buffer)


def replay_sampler(config: CommonConfig) -> reverb.selectors.KeyDistributionOptions:
    """Uniform (the book), or Prioritized(alpha) for prioritized replay."""
    if config.prioritized_replay:
        return reverb.selectors.Prioritized(config.priority_exponent)
    return reverb.selectors.Uniform()


def make_tables(config: CommonConfig, bundle: AgentBundle) -> list[reverb.Table]:
    """`replay` (uniform or prioritized sampling, FIFO removal, signature) and `variables` (latest weights)."""
    replay = reverb.Table(
        name=REPLAY_TABLE,
        sampler=replay_sampler(config),
        remover=reverb.selectors.Fifo(),
        max_size=config.replay_items(config.replay_max_size),
        rate_limiter=replay_rate_limiter(config),
        signature=replay_signature(bundle),
    )
    variables = reverb.Table(
        name=VARIABLES_TABLE,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=1,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature=variables_signature(bundle),
    )
    return [replay, variables]


def table_mismatches(expected: list[reverb.Table], running: dict[str, Any]) -> list[str]:
    """Differences between the configured tables and what the server runs (after a restore).

    Reverb silently keeps a checkpoint's table config (size, limiter, signature); this makes it visible.
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
            problems.append(f"{table.name}.signature differs (checkpoint was written for another env or network)")
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
