"""Settings: the documented dataclasses every role reads, and how they are loaded.

- `common.py`: `CommonConfig`, what every role shares (it fixes specs, signatures and the agent), and which of
  its settings a run decides from its env when left at auto (`AUTO_FROM_ENV`).
- `config.py`: one dataclass per role on top of it; each field is a flag and a `DQN_*` variable.
- `loading.py`: defaults < preset < JSON file < `DQN_*` variables < flags, with one-line errors naming the field.
- `presets.py`: named groups of values with their sources (`--preset breakout`).
- `identity.py`: a replicated actor's id from its container or pod name.
"""
