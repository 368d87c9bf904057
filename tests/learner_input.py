"""The learner's batches as a plain dataset, for tests that inspect what the agent trains on."""

from __future__ import annotations


def make_dataset(config, bundle):
    """[batch_size * train_steps_per_call, L, ...] rows with their sample info (one value per item), as trained on.

    The learner applies the same `finish_batch` inside its feed's staging call (learner/feed.py) instead of a map.
    """
    from learner.dataset import sample_dataset

    return sample_dataset(config, bundle).map(bundle.layout.finish_batch())
