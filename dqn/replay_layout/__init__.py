"""The replay layout: what one replay item holds, and every place that packs or unpacks one.

Open `layout.py` first: `ReplayLayout.from_config(config)` is what `dqn/builder.py` asks. The package's modules:

- `items.py`: table names, item keys and `ItemShape` (steps per item, envs per item, counts); no TensorFlow,
  so the settings' cross-checks (dqn/settings/config.py) use it too.
- `tables.py`: the item signatures and the three Reverb tables built from them.
- `writing.py`: what both actor-side writers share (StructuredWriter patterns, checks, backpressure, close).
- `env_stream_writer.py`: one item stream per env (`--envs-per-item 1`, TF-Agents' observer layout).
- `env_block_writer.py`: items holding a block of envs (the default).
- `dataset.py`: the learner's sampled items as a tf.data.Dataset (Reverb streams, or the book's `as_dataset`).
- `unpack.py`: the learner side: a sampled batch back to [batch, steps, ...] rows, n-step windows closed at
  episode ends, one TD error per item.
- `priority_scale.py`: |TD error| -> priority, shared by the learner's updates and the actors' initial priorities.

This file imports nothing so that `dqn/settings/config.py` can import `items.py` without pulling in TensorFlow.
"""
