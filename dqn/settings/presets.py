"""Named settings (`--preset NAME` / `DQN_PRESET=NAME`): the lowest config layer above the dataclass defaults.

Precedence, lowest first: dataclass defaults < preset < `--config` file < `DQN_*` environment < flags, so any
explicit setting overrides the preset. A preset may hold any role's fields; each role takes the ones it has.
Every value says where it comes from. "The book" = Géron, Hands-On Machine Learning (2nd ed.), ch. 18, the
TF-Agents Breakout agent; "Nature DQN" = Mnih et al. 2015, Extended Data Table 1.

Pure data, no imports: `dqn.settings.config` reads the names for its `choices`.
"""

from __future__ import annotations

BREAKOUT = {
    "env_id": "ALE/Breakout-v5",            # the book: BreakoutNoFrameskip-v4, today's id of the same game in ale-py
    "root_dir": "runs/breakout",
    # Preprocessing: AtariPreprocessing + 4-frame stack, as the book / Nature DQN (the atari_* defaults).
    "max_episode_steps": 27_000,            # the book: 27000 steps = 108k ALE frames (ALE-v5's own cap too)
    # Network: the book's QNetwork = Nature DQN's (32 8x8/4, 64 4x4/2, 64 3x3/1 convs, 512 dense).
    "conv_layer_params": (32, 8, 4, 64, 4, 2, 64, 3, 1),
    "fc_layer_params": (512,),
    # The book/Nature use RMSProp(2.5e-4); this service trains with Adam, at CleanRL dqn_atari's Adam rate.
    "learning_rate": 1e-4,
    "gamma": 0.99,                          # the book and Nature DQN
    "td_loss": "huber",                     # the book: Huber loss (Nature: TD error clipped to [-1, 1])
    "double_dqn": False,                    # the book and Nature DQN: plain DQN targets
    "target_update_period": 2_000,          # the book: 2000 train steps = 32,000 ALE frames
    "target_update_tau": 1.0,               # hard copies (the book, Nature DQN)
    "gradient_clipping": None,              # the book: none (the Huber loss bounds the gradient)
    "epsilon_start": 1.0,                   # the book and Nature DQN
    "epsilon_end": 0.01,                    # the book (Nature DQN: 0.1)
    "epsilon_decay_steps": 62_500,          # the book: 250,000 agent steps // update period 4 = 1M frames (Nature)
    "epsilon_hold_exponent": 0.0,           # the book and Nature DQN: one-step random actions
    "replay_max_size": 1_000_000,           # the book and Nature DQN: 1M transitions
    "replay_min_size": 20_000,              # the book: 20,000 random warm-up steps (Nature DQN: 50,000)
    "batch_size": 32,                       # Nature DQN: minibatch 32 (the book: 64)
    "samples_per_insert": 8.0,              # one SGD step of 32 per 4 agent steps (Nature DQN's update frequency 4)
    "warmup_steps": 10_000,                 # per actor; 2 actors x 10,000 = the book's 20,000 random steps
    "max_train_steps": 625_000,             # 10M ALE frames / 16 frames per SGD step (the book's ~10M frames)
    "publish_interval": 250,                # the conv net is 1.7M parameters (6.7 MB per publication)
    "checkpoint_interval": 10_000,
    "export_interval": 50_000,
    "summary_interval": 500,
    # Evaluation follows Nature DQN (epsilon 0.05, <= 18,000 frames per episode: the evaluator's Atari auto
    # settings), so one costs seconds, not minutes: 2,500 train steps (minutes on 2 cores)
    # shows a trained policy early in a run.
    "eval_interval": 2_500,
    "eval_episodes": 5,
    "eval_confirm_episodes": 10,            # a re-check of a candidate best costs 2 evaluations, not 6
}

# The same game for a small machine (2 CPU cores, a run of about 90 minutes, about 1M agent steps): the preset above
# with an exploration schedule compressed to that budget and the training wrappers of CleanRL's dqn_atari and SB3's
# AtariWrapper. The schedule is this preset's own: CleanRL and rl-baselines3-zoo anneal epsilon over 1M agent steps
# of a 10M-step run. The schedule, the training wrappers, sticky actions and the evaluation cadence differ; network,
# optimizer, replay and the evaluation protocol are the preset's above.
BREAKOUT_SMALL = {
    **BREAKOUT,
    "root_dir": "runs/breakout-small",
    "atari_repeat_action_probability": 0.0,  # the book's BreakoutNoFrameskip-v4 (as CleanRL's and SB3's figures)
    # CleanRL dqn_atari's EpisodicLifeEnv, FireResetEnv and ClipRewardEnv (SB3's AtariWrapper has the same three);
    # training envs only, evaluations play whole games and score unclipped.
    "atari_terminal_on_life_loss": True,
    "atari_fire_on_reset": True,
    "atari_clip_rewards": True,
    # 100,000 agent steps, a tenth of a ~1M-agent-step run (CleanRL and the zoo: 1M agent steps of 10M), so that most
    # of a short run trains near the final epsilon.
    "epsilon_decay_steps": 25_000,
    # 4,000 agent steps, half the book's period (CleanRL and the zoo copy every 1,000 agent steps = 250 SGD steps).
    "target_update_period": 1_000,
    # The book's 625,000 (inherited): a run bounded by --max-wall-time-s trains for as long as its budget lasts.
    # Every evaluation plays whole games on a core the learner could use: a quarter of the cadence above (2,500)
    # still draws a curve over a run and leaves the rest of that CPU to training.
    "eval_interval": 10_000,
    # bfloat16 where the machine computes it natively (AMX or AVX512-BF16 CPUs, GPUs), float32 elsewhere: the conv
    # layers' matmuls are most of an SGD step, and native bfloat16 runs them faster while the weights and the loss
    # stay float32; emulated bfloat16 would be slower than float32.
    "compute_dtype": "auto",
}

#: preset name -> {field name: value}; values are converted and validated like file values.
PRESETS: dict[str, dict[str, object]] = {"breakout": BREAKOUT, "breakout-small": BREAKOUT_SMALL}

PRESET_NAMES = tuple(PRESETS)
