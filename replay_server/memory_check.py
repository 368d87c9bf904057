"""At start, the full replay's estimated size against this container's memory limit.

A replay server over its cgroup limit is OOM-killed as its buffer fills, restarts from its last checkpoint, fills
and dies again, losing what the actors gathered since that checkpoint each time. The estimate is Reverb's
bookkeeping per item and per stored step plus the observations as Reverb keeps them (snappy-compressed chunks:
uint8 images such as Atari frame stacks shrink to a small fraction, other observations are counted at their raw
size), times replay_max_size, plus the server process itself; bench/replay_bytes.py measures each part. Above the
limit the server refuses to start (exit 2) unless `replay_memory_check` is warn; above WARN_FRACTION of it,
it warns. Either message gives the figure and the fix.
"""

from __future__ import annotations

import dataclasses
import math

import tree

from dqn.errors import BadInput
from dqn.replay_layout.items import ItemShape

GIB = 1 << 30
MIB = 1 << 20
#: Reverb's own bytes per item (key, priority, chunk references), shared by the envs of a block item.
ITEM_BYTES = 2_400
#: Reverb's own bytes per stored step beside the observation (action, reward, discount, step type, chunk index).
STEP_BYTES = 100
#: Stored bytes per raw byte of a uint8 image observation (frames are mostly flat colour and stacks repeat frames).
IMAGE_RATIO = 0.08
#: The server process before its tables fill: Python, TensorFlow, Reverb.
BASE_BYTES = 512 * MIB
#: A buffer above this share of the limit leaves too little for checkpoint writes and the allocator's slack.
WARN_FRACTION = 0.8


class ReplayTooLarge(BadInput):
    """The replay's estimated size exceeds the memory limit."""


@dataclasses.dataclass(frozen=True)
class ReplayMemory:
    """The estimate for one config: bytes per stored transition, the whole server's bytes, and the limit."""

    per_transition: float
    transitions: int
    limit: tuple[int, str] | None

    @property
    def needed(self) -> float:
        """Bytes the server holds once its table is full."""
        return BASE_BYTES + self.per_transition * self.transitions

    def fitting_transitions(self, fraction: float) -> int:
        """The largest replay_max_size whose full table stays within `fraction` of the limit."""
        return max(0, int((self.limit[0] * fraction - BASE_BYTES) / self.per_transition))


def bytes_per_transition(observation_spec, envs_per_item: int) -> float:
    """Estimated replay bytes per stored transition for this observation spec and block size."""
    observation = 0.0
    for spec in tree.flatten(observation_spec):
        raw = math.prod(spec.shape) * spec.dtype.itemsize
        image = spec.dtype.kind == "u" and spec.dtype.itemsize == 1 and len(spec.shape) >= 3
        observation += raw * (IMAGE_RATIO if image else 1.0)
    return STEP_BYTES + ITEM_BYTES / envs_per_item + observation


def estimate(config, observation_spec, limit: tuple[int, str] | None) -> ReplayMemory:
    """The estimate for `config` (a replay server's or `local`'s) against `limit` ((bytes, source) or None)."""
    per_transition = bytes_per_transition(observation_spec, ItemShape.from_config(config).envs_per_item)
    return ReplayMemory(per_transition, config.replay_max_size, limit)


def check_replay_memory(config, observation_spec, limit: tuple[int, str] | None) -> str | None:
    """Raises ReplayTooLarge (exit 2) if the full replay would not fit `limit` (`memory_limit()`: this process's).

    Returns a warning line if it would fill most of it (or does not fit and `replay_memory_check` is warn), else
    None.
    """
    if config.replay_memory_check == "off":
        return None
    memory = estimate(config, observation_spec, limit)
    if memory.limit is None or memory.needed <= memory.limit[0] * WARN_FRACTION:
        return None
    limit, source = memory.limit
    figure = (f"the replay server needs about {memory.needed / GIB:.1f} GiB once its table is full "
              f"(replay_max_size {memory.transitions:,} transitions x ~{memory.per_transition:,.0f} bytes, plus "
              f"{BASE_BYTES // MIB} MiB for the process) and its memory limit is {limit / GIB:.1f} GiB ({source})")
    fix = (f"lower --replay-max-size / DQN_REPLAY_MAX_SIZE to {memory.fitting_transitions(WARN_FRACTION):,} or "
           f"less, or raise the memory limit to {memory.needed / WARN_FRACTION / GIB:.1f} GiB or more "
           "(docker-compose.yml: deploy.resources.limits.memory; Kubernetes: the container's "
           "resources.limits.memory)")
    if memory.needed <= limit:
        return f"{figure}: over {WARN_FRACTION:.0%} of it, little is left for checkpoint writes. Fix: {fix}."
    message = (f"{figure}: it would be OOM-killed as the buffer fills and lose what it gathered since its last "
               f"checkpoint at each restart. Fix: {fix}")
    if config.replay_memory_check == "warn":
        return f"{message} (starting anyway: --replay-memory-check warn)."
    raise ReplayTooLarge(f"{message}; or --replay-memory-check warn to start anyway, the estimate being rough.")
