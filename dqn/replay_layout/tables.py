"""Item signatures and the Reverb tables built from them (the replay server serves what this makes)."""

from __future__ import annotations

import math

import reverb
import tensorflow as tf
from tf_agents.specs import tensor_spec

from dqn.replay_layout.items import (
    EXPLORATION_START_KEY,
    INITIAL_PRIORITY_KEY,
    LEARNER_SPEED_TABLE,
    POLICY_VARIABLES_KEY,
    REPLAY_TABLE,
    REPORT_KEY,
    REQUESTS_TABLE,
    RESET_REQUEST_STEP_KEY,
    ROLE_REPORTS_TABLE,
    RUN_SETTINGS_KEY,
    RUN_SETTINGS_TABLE,
    SIGNATURE_KEY,
    TRAIN_STEP_KEY,
    VARIABLES_TABLE,
    VERDICT_TABLE,
    ItemShape,
)


def item_step_spec(shape: ItemShape, collect_data_spec) -> object:
    """One step of one replay item: the agent's collect_data_spec, [E, ...] for a block, + the actor's priority."""
    spec = collect_data_spec
    if shape.envs_per_item > 1:
        spec = tensor_spec.add_outer_dim(tensor_spec.from_spec(spec), shape.envs_per_item)
    if shape.actors_send_priorities:  # one priority per item step, also for a block (see env_block_writer.py)
        spec = spec._replace(
            policy_info={INITIAL_PRIORITY_KEY: tf.TensorSpec((), tf.float32, name=INITIAL_PRIORITY_KEY)})
    return spec


def replay_signature(shape: ItemShape, step_spec) -> object:
    """Signature of one replay item: `sequence_length` consecutive steps of one env, or of a block of envs."""
    return tensor_spec.add_outer_dim(tensor_spec.from_spec(step_spec), shape.sequence_length)


def variables_signature(policy_variables: list) -> dict[str, object]:
    """Signature of the single `variables` item: policy weights, their train step, the epsilon schedule's start.

    Its `signature` field (an HMAC, empty without a shared key) is there with or without a key, so turning the key
    on or off never changes the table.
    """
    return {
        POLICY_VARIABLES_KEY: [tf.TensorSpec(v.shape, v.dtype) for v in policy_variables],
        TRAIN_STEP_KEY: tf.TensorSpec((), tf.int64),
        EXPLORATION_START_KEY: tf.TensorSpec((), tf.int64),
        SIGNATURE_KEY: tf.TensorSpec((), tf.string),
    }


def requests_signature() -> dict[str, object]:
    """Signature of the single `learner_requests` item: the train step of the evaluation asking for a reset, signed."""
    return {RESET_REQUEST_STEP_KEY: tf.TensorSpec((), tf.int64), SIGNATURE_KEY: tf.TensorSpec((), tf.string)}


def run_settings_signature() -> dict[str, object]:
    """Signature of the single `run_settings` item: the run's resolved settings as JSON text."""
    return {RUN_SETTINGS_KEY: tf.TensorSpec((), tf.string)}


#: Reports the `role_reports` table keeps until the replay server reads them; the oldest go first when it is full.
ROLE_REPORTS_MAX = 4096


def report_tables() -> list[reverb.Table]:
    """`role_reports` (each report read once, oldest first, never blocking a writer) and the one-item `verdict`."""
    signature = {REPORT_KEY: tf.TensorSpec((), tf.string)}
    reports = reverb.Table(name=ROLE_REPORTS_TABLE, sampler=reverb.selectors.Fifo(), remover=reverb.selectors.Fifo(),
                           max_size=ROLE_REPORTS_MAX, max_times_sampled=1,
                           rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)
    return [reports, latest_item_table(VERDICT_TABLE, signature)]


#: The default replay ratio, and the auto ratio for envs whose step costs less than the learner's share of it.
DEFAULT_SAMPLES_PER_INSERT = 4.0
#: The auto ratio's ceiling: past it a slow env's few transitions are replayed so often that DQN mostly fits noise.
MAX_AUTO_SAMPLES_PER_INSERT = 32.0
#: Env steps cheaper than this keep the default ratio without timing the learner. The rule is for simulators that
#: take milliseconds a step; classic control, Box2D and grid games step in microseconds, and timing the learner
#: (building and tracing its train step) would add seconds to every start of theirs.
SLOW_STEP_SECONDS = 1e-4


def auto_samples_per_insert(step_seconds: float, learner_seconds_per_sample: float | None) -> float:
    """The replay ratio for an env whose step takes `step_seconds`, with a learner that spends the given time a sample.

    As many samples of each transition as the learner can train on while the env makes the next one, rounded
    down to a power of 2, within [DEFAULT_SAMPLES_PER_INSERT, MAX_AUTO_SAMPLES_PER_INSERT]. `None` for the learner
    (not timed: the env step is below SLOW_STEP_SECONDS) keeps the default.
    """
    if learner_seconds_per_sample is None:
        return DEFAULT_SAMPLES_PER_INSERT
    affordable = step_seconds / learner_seconds_per_sample
    if affordable < 2 * DEFAULT_SAMPLES_PER_INSERT:
        return DEFAULT_SAMPLES_PER_INSERT
    return min(MAX_AUTO_SAMPLES_PER_INSERT, float(2 ** math.floor(math.log2(affordable))))


def pending_settings_tables() -> list[reverb.Table]:
    """What a replay server serves while it waits for the learner's speed: the pending settings and the answer."""
    return [latest_item_table(RUN_SETTINGS_TABLE, run_settings_signature()),
            latest_item_table(LEARNER_SPEED_TABLE, run_settings_signature())]


def replay_rate_limiter(config, shape: ItemShape, samples_per_insert: float) -> reverb.rate_limiters.RateLimiter:
    """MinSize, or SampleToInsertRatio when samples_per_insert > 0 (keeps actors and learner in step).

    Counted in items; with block items every item holds envs_per_item transitions, so samples per insert
    means the same per transition. `samples_per_insert` is config.samples_per_insert with auto resolved.
    """
    min_items = shape.items(config.replay_min_size)
    if samples_per_insert <= 0:
        return reverb.rate_limiters.MinSize(min_items)
    spi = samples_per_insert
    # Reverb needs the allowed window to hold at least 2 * max(1, spi) or it can deadlock.
    error_buffer = max(config.samples_per_insert_tolerance * min_items * spi, 2.0 * max(1.0, spi))
    return reverb.rate_limiters.SampleToInsertRatio(spi, min_items, error_buffer)


def replay_sampler(config) -> reverb.selectors.KeyDistributionOptions:
    """Uniform (the book), or Prioritized(alpha) for prioritized replay."""
    if config.prioritized_replay:
        return reverb.selectors.Prioritized(config.priority_exponent)
    return reverb.selectors.Uniform()


def latest_item_table(name: str, signature) -> reverb.Table:
    """A table that holds only its newest item (max_size 1, FIFO); a sample waits until there is one."""
    return reverb.Table(name=name, sampler=reverb.selectors.Uniform(), remover=reverb.selectors.Fifo(), max_size=1,
                        rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)


def make_tables(config, shape: ItemShape, replay_item_signature, variables_item_signature,
                samples_per_insert: float) -> list[reverb.Table]:
    """The `replay`, `variables`, `learner_requests`, `run_settings` tables and the verdict's `role_reports`, `verdict`.

    `variables` holds the latest weights, `learner_requests` the evaluator's reset request. `replay` samples
    uniformly or by priority and removes FIFO; the others but `role_reports` hold their latest item.
    """
    replay = reverb.Table(
        name=REPLAY_TABLE,
        sampler=replay_sampler(config),
        remover=reverb.selectors.Fifo(),
        max_size=shape.items(config.replay_max_size),
        rate_limiter=replay_rate_limiter(config, shape, samples_per_insert),
        signature=replay_item_signature,
    )
    variables = latest_item_table(VARIABLES_TABLE, variables_item_signature)
    requests = latest_item_table(REQUESTS_TABLE, requests_signature())
    settings = latest_item_table(RUN_SETTINGS_TABLE, run_settings_signature())
    return [replay, variables, requests, settings, *report_tables()]
