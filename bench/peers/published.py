"""Published DQN settings for the peer suite's env families, for SB3 DQN; imported under the peer virtualenv.

Where an env's authors publish DQN settings, those (MinAtar, highway-env); for Breakout rl-baselines3-zoo's Atari
entry; where neither the authors nor the zoo publish any for DQN, the nearest published recipe, with why (popgym,
Flappy Bird, MiniGrid: `NEAREST`, whose peer may take the sweep's settings instead). Beyond SB3's DQN arguments a
recipe may hold `source` (where it comes from), `policy` "minatar" (MinAtar's own network), `make_kwargs`
(gym.make's), `torch_threads` (None: torch's default, every core, as SB3 runs unless told otherwise; without the key
1, a thread as each of the service's roles has), `env_wrapper` "flatten" (a Dict observation as one vector) or
"atari" (SB3's AtariWrapper and a 4-frame stack, as the zoo's `frame_stack: 4`) and `normalize` (the zoo's
`normalize: true`: SB3's VecNormalize with its defaults, observations and rewards scaled by running statistics).
`sb3_arguments` turns a recipe into DQN's arguments, `wrap_env` applies its wrapper, `normalized` its observation
scaling at evaluation.
"""

from __future__ import annotations

import numpy as np

#: rl-baselines3-zoo hyperparams/dqn.yml CartPole-v1: the zoo's entry for a small feature vector with two actions.
ZOO_CARTPOLE = dict(
    source="rl-baselines3-zoo hyperparams/dqn.yml, CartPole-v1", n_timesteps=50_000, policy="MlpPolicy",
    policy_kwargs=dict(net_arch=[256, 256]), learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
    learning_starts=1_000, gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
    exploration_fraction=0.16, exploration_final_eps=0.04)

#: rl-baselines3-zoo's MiniGrid recipe (hyperparams/ppo.yml: the observation flattened for an MLP, `normalize: true`,
#: 1e5 steps) with its tuned Acrobot-v1 DQN entry.
MINIGRID_RECIPE = dict(
    source="rl-baselines3-zoo: MiniGrid recipe (flattened observation, MLP, normalize, 1e5 steps) with the dqn.yml "
           "Acrobot-v1 entry", env_wrapper="flatten", normalize=True, n_timesteps=100_000, policy="MlpPolicy",
    policy_kwargs=dict(net_arch=[256, 256]), learning_rate=6.3e-4, batch_size=128, buffer_size=50_000,
    learning_starts=0, gamma=0.99, target_update_interval=250, train_freq=4, gradient_steps=-1,
    exploration_fraction=0.12, exploration_final_eps=0.1)

#: rl-baselines3-zoo hyperparams/dqn.yml `atari` (its Breakout figures are BreakoutNoFrameskip-v4's game: no frame
#: skip in ALE, no sticky actions, as the service's breakout-small preset plays ALE/Breakout-v5).
ZOO_ATARI = dict(
    source="rl-baselines3-zoo hyperparams/dqn.yml, atari", env_wrapper="atari",
    make_kwargs=dict(frameskip=1, repeat_action_probability=0.0), n_timesteps=10_000_000, policy="CnnPolicy",
    buffer_size=100_000, learning_rate=1e-4, batch_size=32, learning_starts=100_000, target_update_interval=1_000,
    train_freq=4, gradient_steps=1, exploration_fraction=0.1, exploration_final_eps=0.01, optimize_memory_usage=False,
    torch_threads=None)

#: Published DQN settings per env id (as `--env-id` names it), with their source.
PUBLISHED = {
    # MinAtar's authors: examples/dqn.py of kenjyoung/MinAtar (Young & Tian 2019): batch 32, replay 100k, target
    # update every 1,000 steps, a train step every env step, 5M frames, epsilon 1 -> 0.1 over the first 100k
    # frames, replay start 5,000, RMSprop(lr 2.5e-4, alpha 0.95, eps 0.01, centered), gamma 0.99, Huber loss;
    # Q-network conv 16x3x3 stride 1 -> ReLU -> dense 128 -> ReLU -> actions.
    "bench.peer_envs:MinAtar/Breakout-v1": dict(
        source="MinAtar authors, examples/dqn.py", n_timesteps=5_000_000, policy="minatar",
        learning_rate=2.5e-4, buffer_size=100_000, learning_starts=5_000, batch_size=32, gamma=0.99,
        train_freq=1, gradient_steps=1, target_update_interval=1_000, exploration_initial_eps=1.0,
        exploration_final_eps=0.1, exploration_fraction=100_000 / 5_000_000, max_grad_norm=1e9),
    # highway-env's authors: README "Training" example / scripts/sb3_highway_dqn.py (highway-fast-v0, 2e4 steps);
    # exploration left at SB3's defaults there.
    "highway_env:highway-fast-v0": dict(
        source="highway-env authors, README / scripts/sb3_highway_dqn.py", n_timesteps=20_000, policy="MlpPolicy",
        policy_kwargs=dict(net_arch=[256, 256]), learning_rate=5e-4, buffer_size=15_000, learning_starts=200,
        batch_size=32, gamma=0.8, train_freq=1, gradient_steps=1, target_update_interval=50),
    # popgym's authors publish no DQN settings (their baselines are RLlib PPO with memory models): rl-baselines3-zoo
    # hyperparams/dqn.yml CartPole-v1, the env these observe positions of (the noisy one with noise added).
    "popgym:popgym-PositionOnlyCartPoleEasy-v0": ZOO_CARTPOLE,
    "popgym:popgym-PositionOnlyCartPoleHard-v0": ZOO_CARTPOLE,
    "popgym:popgym-NoisyPositionOnlyCartPoleEasy-v0": ZOO_CARTPOLE,
    # flappy-bird-gymnasium's authors publish no DQN settings for SB3 (their DQN example is their own code): the
    # zoo's CartPole-v1 entry, as for popgym.
    "bench.peer_envs:FlappyBird/Features-v0": ZOO_CARTPOLE,
    # MiniGrid's authors publish no DQN settings (their SB3 tutorial trains PPO), nor does the zoo; the zoo's
    # MiniGrid recipe (hyperparams/ppo.yml) flattens the observation for an MLP (its FlatObsWrapper; here
    # gymnasium's FlattenObservation, as the mission text is already filtered out) and normalizes it, with a
    # 1e5-step schedule for DoorKey-5x5. SB3's MultiInputPolicy cannot take the Dict itself: it gives uint8 image
    # parts its Nature CNN, whose 8x8 kernel does not fit the 7x7 view. DQN settings: the zoo's tuned Acrobot-v1
    # entry, its tuned task whose return improves only by reaching a goal sooner. The same for MiniGrid's other rooms.
    "bench.peer_envs:MiniGrid/DoorKey-5x5-v0": MINIGRID_RECIPE,
    "bench.peer_envs:MiniGrid/Empty-Random-6x6-v0": MINIGRID_RECIPE,
    "bench.peer_envs:MiniGrid/LavaGapS5-v0": MINIGRID_RECIPE,
    "ALE/Breakout-v5": ZOO_ATARI,
}
#: The envs above whose recipe is only the nearest published one, made for another env: as for an env with no recipe,
#: their peer may take a setting of the sweep instead (sb3_snapshots' NO_RECIPE_SWEEP).
NEAREST = frozenset(env_id for env_id, params in PUBLISHED.items() if params in (ZOO_CARTPOLE, MINIGRID_RECIPE))
#: A recipe's keys that say how its env is observed, not how DQN learns: a setting of the sweep keeps them.
OBSERVATION_KEYS = ("env_wrapper", "normalize", "make_kwargs", "frame_stack")

#: What is not one of SB3 DQN's own arguments.
RECIPE_ONLY = ("source", "n_timesteps", "torch_threads", *OBSERVATION_KEYS)
#: Frames in the Atari recipe's stack (the zoo's `frame_stack`).
ATARI_FRAME_STACK = 4
#: VecNormalize's defaults (stable_baselines3 2.9.2): observations clipped to +-10 after scaling; epsilon in the root.
CLIP_OBS, NORM_EPSILON = 10.0, 1e-8


def minatar_policy_kwargs() -> dict:
    """MinAtar's Q-network: one 16-filter 3x3 conv over the channels-last bool grid, then dense 128; its RMSprop."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class MinAtarConv(BaseFeaturesExtractor):
        def __init__(self, observation_space):
            height, width, channels = observation_space.shape
            super().__init__(observation_space, features_dim=16 * (height - 2) * (width - 2))
            self.conv = torch.nn.Sequential(torch.nn.Conv2d(channels, 16, 3, stride=1), torch.nn.ReLU(),
                                            torch.nn.Flatten())

        def forward(self, observations):
            return self.conv(observations.float().permute(0, 3, 1, 2))

    return dict(features_extractor_class=MinAtarConv, net_arch=[128], optimizer_class=torch.optim.RMSprop,
                optimizer_kwargs=dict(alpha=0.95, eps=0.01, centered=True))


def sb3_arguments(params: dict) -> dict:
    """A recipe as SB3 DQN's arguments: the recipe-only keys dropped, "minatar" as its network."""
    arguments = {key: value for key, value in params.items() if key not in RECIPE_ONLY}
    if arguments.get("policy") == "minatar":
        arguments["policy"], arguments["policy_kwargs"] = "MlpPolicy", minatar_policy_kwargs()
    return arguments


def wrap_env(env, params: dict, evaluation: bool = False):
    """`env` as the recipe observes it: "flatten", gymnasium's FlattenObservation; "atari", SB3's AtariWrapper.

    `frame_stack` N (not with "atari", which stacks its own) stacks the last N observations, zero-padded after a
    reset, as the zoo's `frame_stack` (SB3's VecFrameStack) does; SB3's MlpPolicy flattens the stack.

    The Atari frames are stacked in the env, zero-padded after a reset as SB3's VecFrameStack does, channels first
    (4, 84, 84), as the zoo's stack reaches its CnnPolicy after VecTransposeImage. For `evaluation` whole games with
    unclipped scores (no end at a lost life, no clipped reward).
    """
    import gymnasium as gym

    if params.get("frame_stack"):
        env = gym.wrappers.FrameStackObservation(env, params["frame_stack"], padding_type="zero")
    if params.get("env_wrapper") == "flatten":
        return gym.wrappers.FlattenObservation(env)
    if params.get("env_wrapper") == "atari":
        from stable_baselines3.common.atari_wrappers import AtariWrapper

        env = AtariWrapper(env, terminal_on_life_loss=not evaluation, clip_reward=not evaluation)  # (84, 84, 1)
        stacked = gym.wrappers.FrameStackObservation(env, ATARI_FRAME_STACK, padding_type="zero")  # (4, 84, 84, 1)
        return gym.wrappers.ReshapeObservation(stacked, stacked.observation_space.shape[:-1])
    return env


def normalized(observations: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Observations scaled as VecNormalize scales them with running statistics (mean, var) at evaluation."""
    return np.clip((observations - mean) / np.sqrt(var + NORM_EPSILON), -CLIP_OBS, CLIP_OBS).astype(np.float32)
