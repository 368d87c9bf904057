"""Envs: everything between a user's gymnasium env and the TF-Agents specs and time steps the roles use.

- `making.py`: `EnvOptions` and `make_gym_env` (`gym.make` plus the wrappers every role applies).
- `atari.py`: ale-py ids and the book's Atari preprocessing.
- `spaces.py`: gymnasium spaces -> TF-Agents specs, and which spaces DQN accepts.
- `vector_env.py`: `GymnasiumVectorEnvironment`, N envs as one batched PyEnvironment.
- `faults.py`: sub-envs that raise are recreated instead of ending the process.
- `single_env.py`: one env as a PyEnvironment, for TF-Agents' own single-env drivers and observers.
"""
