"""Settings: the documented dataclasses every role reads, and how they are loaded.

- `config.py`: one dataclass per role (`CommonConfig` fixes specs and signatures); each field is a flag and a
  `DQN_*` variable.
- `loading.py`: defaults < preset < JSON file < `DQN_*` variables < flags, with one-line errors naming the field.
- `presets.py`: named groups of values with their sources (`--preset breakout`).
- `identity.py`: a replicated actor's id from its container or pod name.
"""
