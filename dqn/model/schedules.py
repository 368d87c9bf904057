"""Linear schedules over train steps: the collect epsilon's decay and prioritized replay's importance exponent."""

from __future__ import annotations


def linear_anneal(start: float, end: float, steps: int, step: int) -> float:
    """`start` at step 0, `end` from `steps` on, linear in between (steps <= 0: `end` at once)."""
    if steps <= 0:
        return end
    fraction = min(1.0, max(0, step) / steps)
    return start + fraction * (end - start)


def epsilon_at(config, train_step: int) -> float:
    """The collect epsilon at `train_step` (the notebook's PolynomialDecay with power 1); `config`: a CommonConfig."""
    return linear_anneal(config.epsilon_start, config.epsilon_end, config.epsilon_decay_steps, train_step)
