"""Helpers several tests share: batched env steps, reading and filling a real replay server, the learner's
batches, replaying a policy."""

from __future__ import annotations

#: Envs of `collect_steps` unless told otherwise.
NUM_ENVS = 3
#: Role flags for quick integration runs: a small replay warm-up, a small network, 4-env blocks.
FAST = ["--replay-min-size", "200", "--fc-layer-params", "32", "--envs-per-item", "4"]
#: Learner-only: the default batch of 256 needs 64 inserts per SGD step, slow for 4-env test actors.
LEARNER_FAST = ["--batch-size", "64"]
#: Replay-server flags without a rate limiter, so tests can fill the table without a learner.
NO_LIMITER = ("--samples-per-insert", "0")


def read_all_items(client, table):
    """Every item of a queue table, each as a tuple of raw bytes (a hashable, comparable form)."""
    import numpy as np
    import tree

    size = client.server_info(timeout=10)[table].current_size
    items = []
    for sample in client.sample(table, num_samples=size, emit_timesteps=False):
        items.append(tuple(np.asarray(leaf).tobytes() + str(np.asarray(leaf).shape).encode()
                           for leaf in tree.flatten(sample.data)))
    return items


def collect_steps(num_steps, max_episode_steps, num_envs=NUM_ENVS, seed=11, action_seed=5):
    """Batched (time_step, action, next_time_step) triples with short episodes: terminations and truncations."""
    import numpy as np

    from dqn.envs.vector_env import GymnasiumVectorEnvironment

    env = GymnasiumVectorEnvironment("CartPole-v1", num_envs, seed=seed, max_episode_steps=max_episode_steps)
    rng = np.random.default_rng(action_seed)
    steps, time_step = [], env.reset()
    for _ in range(num_steps):
        action = rng.integers(0, 2, size=num_envs).astype(np.int64)
        next_time_step = env.step(action)
        steps.append((time_step, action, next_time_step))
        time_step = next_time_step
    return steps


def fill_replay(address: str, num_transitions: int, num_envs: int = 16, envs_per_item: int | None = None,
                seed: int = 0) -> int:
    """Writes at least `num_transitions` random-policy CartPole transitions through the actor's writer.

    `envs_per_item` must match the server's (default: the default config's, as a server without the flag).
    Returns the number of items written.
    """
    import numpy as np
    import reverb

    from dqn.envs.vector_env import GymnasiumVectorEnvironment
    from dqn.replay_layout.env_block_writer import BlockStreams
    from dqn.replay_layout.env_stream_writer import TrajectoryStreams
    from dqn.replay_layout.items import ItemShape
    from dqn.settings.config import CommonConfig

    envs = ItemShape.from_config(CommonConfig()).envs_per_item if envs_per_item is None else envs_per_item
    env = GymnasiumVectorEnvironment("CartPole-v1", num_envs, seed=seed)
    client = reverb.Client(address)
    streams = BlockStreams(client, num_envs, envs) if envs > 1 else TrajectoryStreams(client, num_envs)
    rng = np.random.default_rng(seed)
    time_step = env.reset()
    while streams.items_created * envs < num_transitions:
        action = rng.integers(0, 2, size=num_envs, dtype=np.int64)
        next_time_step = env.step(action)
        streams.append(time_step, action, next_time_step)
        streams.wait_for_server(max_pending_per_stream=4, timeout_ms=30_000)  # < Reverb's pending-items warning
        time_step = next_time_step
    streams.close(timeout_ms=120_000)
    env.close()
    return streams.items_created


def make_dataset(config):
    """The learner's batches as a dataset: [batch, L, ...] rows as trained on, with one sample info per item.

    The learner applies the same `finish_batch` inside its staging call (learner/staged_batches.py) instead of a map.
    """
    from dqn.resolve import resolved_builder

    builder = resolved_builder(config)
    return builder.make_dataset().map(builder.layout.finish_batch())


def fill_and_count(address: str, steps: int, num_envs: int = 16) -> int:
    """Writes random CartPole transitions through the actor's writer; returns the replay table's size after."""
    import reverb

    from dqn.replay_layout.items import REPLAY_TABLE

    fill_replay(address, steps, num_envs=num_envs)
    return reverb.Client(address).server_info(timeout=10)[REPLAY_TABLE].current_size


#: Every setting the resolve step decides, explicit: `auto_setting` leaves one of them at auto.
EXPLICIT_AUTO_SETTINGS = {"observation_history": 1, "image_encoding": "scaled", "samples_per_insert": 4.0}


def auto_setting(env_id: str, name: str, **settings):
    """What the resolve step (dqn/resolve.py) decides for setting `name` of `env_id`, the others explicit."""
    from dqn.resolve import resolve_settings
    from dqn.settings.config import CommonConfig

    explicit = {key: value for key, value in EXPLICIT_AUTO_SETTINGS.items() if key != name}
    return getattr(resolve_settings(CommonConfig(env_id=env_id, **{**explicit, **settings})), name)
