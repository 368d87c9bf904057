"""Envs: everything between a user's gymnasium env and the TF-Agents specs and time steps the roles use.

- `making.py`: `EnvOptions` and `make_gym_env` (`gym.make` plus the wrappers every role applies).
- `atari.py`: ale-py ids and the book's Atari preprocessing.
- `spaces.py`: gymnasium spaces -> TF-Agents specs, and which spaces DQN accepts.
- `action_spaces.py`: the env's actions as the service acts on them (Discrete, several dimensions flat or branched).
- `action_masks.py`: masks of valid actions: which convention an env follows, the mask as an observation part.
- `vector_env.py`: `GymnasiumVectorEnvironment`, N envs as one batched PyEnvironment.
- `faults.py`: sub-envs that raise are recreated instead of ending the process.
- `call_timer.py`: a deadline on every call into the env (a step that never returns).
- `random_play.py`, `image_codes.py`, `hidden_state.py`: what seeded random play shows before training (step cost,
  category codes, an observation that hides part of the state), for the settings left at auto.
"""
