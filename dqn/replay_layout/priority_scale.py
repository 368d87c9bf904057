"""The priority scale shared by the learner's updates and the actors' initial priorities (prioritized replay).

Priorities are |TD error| divided by the largest |TD error| seen so far by whoever computes them, so 1.0 is
always the top of the scale. A new item at 1.0 is PER's "maximum priority" rule, and an actor that sends its
own |TD error| (Ape-X) lands on the same [MIN_PRIORITY, 1] range without knowing the learner's scale.
"""

from __future__ import annotations

import numpy as np

#: Keeps every item sampleable: a zero priority would never be drawn again.
MIN_PRIORITY = 1e-3


class PriorityScale:
    """Maps |TD errors| to priorities in [MIN_PRIORITY, 1], remembering the largest magnitude seen."""

    def __init__(self) -> None:
        self.max_abs_td = 1e-6

    def __call__(self, td_errors: np.ndarray) -> np.ndarray:
        """|δ| / max |δ| seen so far, clipped to [MIN_PRIORITY, 1]; sequences (2-D) rank by their largest |δ|."""
        magnitude = np.abs(np.asarray(td_errors, dtype=np.float64))
        if magnitude.ndim > 1:
            magnitude = magnitude.reshape(len(magnitude), -1).max(axis=1)
        finite = magnitude[np.isfinite(magnitude)]
        self.max_abs_td = max(self.max_abs_td, float(finite.max(initial=0.0)))
        # A non-finite TD error (a diverged network) gets the top priority rather than poisoning the scale.
        return np.clip(np.nan_to_num(magnitude / self.max_abs_td, nan=1.0, posinf=1.0), MIN_PRIORITY, 1.0)
