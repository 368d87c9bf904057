"""The settings every role shares: `CommonConfig`, which fixes specs, signatures and the agent.

`CommonConfig` holds everything that shapes the data (env, network, replay layout) and the DqnAgent: every role
builds the same specs, table signatures and agent from it, so no role waits for another's files. The agent's
training settings (learning_rate, td_loss, target updates, ...) are here for that reason: only the learner trains.
Defaults are tuned for CartPole-v1 on a 2-core CPU machine; docs/defaults.md says why each is what it is.
Each `setting` help is one line: what it does and its unit (`--help` adds the accepted values, env var, default).
"""

from __future__ import annotations

import dataclasses
import os

from dqn.settings.loading import ConfigError, setting
from dqn.settings.presets import PRESET_NAMES

#: Settings a run decides from its env when left at auto, and the value that means auto for each. The resolve step
#: (dqn/resolve.py) decides them once per run; every role then uses exactly those values.
AUTO_FROM_ENV = {"observation_history": None, "image_encoding": "auto", "samples_per_insert": None,
                 "action_mask": "auto"}

#: Multi-discrete actions get one Q-value per combination up to this many combinations: one output per combination
#: captures how dimensions interact, and the learner's SGD step slows with its output layer, which up to here costs
#: less than the rest of the step on a 2-core CPU.
MAX_FLAT_ACTIONS = 256
#: Beyond that a branching Q-network, up to this many outputs (dimensions x values of the widest): where the output
#: layer has come to cost about twice the rest of the step; a larger space is refused at start.
MAX_BRANCH_OUTPUTS = 1024

#: Transitions per SGD step when batch_size is auto; with an RNN, sequences holding about as many steps.
AUTO_BATCH_TRANSITIONS = 256
#: The shortest shared_key accepted: shorter ones are guessed by trying keys against one signed item.
MIN_SHARED_KEY_CHARS = 16
#: envs_per_item 0 (auto) resolves to this without an RNN: Reverb's per-item cost paid once per 16 transitions.
AUTO_ENVS_PER_ITEM = 16


@dataclasses.dataclass(frozen=True)
class CommonConfig:
    """Settings every role shares; they fix specs, signatures, the variable layout and the agent every role builds."""

    root_dir: str = setting("runs/cartpole", "run directory for logs, summaries, checkpoints and the resolved "
                            "config.json")
    env_id: str = setting("CartPole-v1", "gymnasium environment id (module:Id imports module first); needs "
                          "Discrete, MultiDiscrete or Tuple-of-Discrete actions")
    seed: int = setting(0, "base random seed; each actor and env derives its own from it", ge=0)
    replay_address: str = setting("localhost:8000", "host:port of the replay server (the replay data)")
    control_address: str | None = setting(None, "host:port of a server serving the variables, learner_requests and "
                                          "run_settings tables (weights, reset requests, the run's settings), as "
                                          "the replay server does; none = replay_address")
    shared_key: str | None = setting(None, "key that signs the weights and reset requests (HMAC-SHA256); readers "
                                     "refuse unsigned ones; the same on every role, environment only; none = "
                                     "unsigned", secret=True)
    rpc_timeout_s: float = setting(10.0, "deadline of one remote call to the replay server, in seconds", gt=0)
    connect_timeout_s: float = setting(120.0, "seconds to wait for the replay server at start before exiting with "
                                       "code 1", gt=0)
    report_interval_s: float = setting(2.0, "seconds between this role's reports to the replay server for the "
                                       "bottleneck verdict (dqn-service status); 0 = send none", ge=0)
    machine_name: str = setting("", "the machine this role runs on, as the bottleneck verdict counts cores: roles "
                                "on one machine share them; empty = the host name, in a container the kernel's boot id")
    preset: str | None = setting(None, "named group of settings (dqn/settings/presets.py) applied below --config, "
                                 "DQN_* variables and flags; none = no preset", choices=PRESET_NAMES)
    max_episode_steps: int = setting(0, "truncate episodes after this many agent steps; 0 = the env's own limit", ge=0)
    env_call_timeout_s: float = setting(20.0, "a sub-env step or reset still running after this many seconds is "
                                        "abandoned and the sub-env recreated; 0 = no limit", ge=0)
    atari_noop_max: int = setting(30, "Atari only: at most this many no-op actions at reset", ge=0)
    atari_frame_skip: int = setting(4, "Atari only: emulator frames per agent action, max-pooled over the last 2", ge=1)
    atari_screen_size: int = setting(84, "Atari only: side of the square observation frame, in pixels", ge=8)
    atari_grayscale: bool = setting(True, "Atari only: grayscale frames instead of RGB")
    atari_terminal_on_life_loss: bool = setting(False, "Atari only, training: a lost life ends the episode, the "
                                                "game goes on at the next reset (evaluation plays whole games)")
    atari_fire_on_reset: bool = setting(False, "Atari only: press FIRE after each reset in games that have it (many "
                                        "start play on FIRE)")
    atari_clip_rewards: bool = setting(False, "Atari only, training: rewards clipped to their sign, -1, 0 or 1 "
                                       "(evaluation scores unclipped)")
    atari_frame_stack: int = setting(4, "Atari only: last frames stacked as observation channels", ge=1)
    atari_repeat_action_probability: float = setting(0.25, "Atari only: sticky-action probability (the emulator "
                                                     "repeats the previous action)", ge=0, le=1)
    observation_history: int | None = setting(None, "vector observations: the last this many concatenated, oldest "
                                              "first; none = auto: 2 where random play shows the observation "
                                              "hides part of the state (a velocity), else 1", ge=1)
    conv_layer_params: tuple[int, ...] | None = setting(None, "Q-network conv layers for image observations as "
                                                        "filters,kernel,stride triples, e.g. 32,8,4,64,4,2,64,3,1; "
                                                        "none = chosen from the image size", ge=1)
    fc_layer_params: tuple[int, ...] = setting((256, 256), "Q-network hidden layer sizes, in units, e.g. 256,256; "
                                               "with lstm_size they follow the LSTM", ge=1)
    layer_norm: bool = setting(False, "layer normalisation of each hidden layer of the Q-network, before its ReLU "
                               "(feed-forward networks)")
    compute_dtype: str = setting("float32", "dtype the Q-network's hidden layers compute in (weights, Q-values and "
                                 "the loss stay float32); auto = bfloat16 on a GPU or a CPU with AMX or "
                                 "AVX512-BF16 for feed-forward networks, else float32",
                                 choices=("float32", "bfloat16", "auto"))
    observation_scaling: str = setting("narrow", "MLP inputs, scaled inside the network: narrow = features whose Box "
                                       "bound is below 1 divided by it; bounds = every bounded feature; none = raw",
                                       choices=("narrow", "bounds", "none"))
    image_encoding: str = setting("auto", "integer image parts: scaled = divided by their bound; one-hot = values "
                                  "are category codes 0-15, one-hot per cell and channel; auto = one-hot where "
                                  "random play shows only values below 16", choices=("auto", "scaled", "one-hot"))
    action_mask: str = setting("auto", "mask of valid actions: observation = the Dict observation's "
                               "action_mask_key part, info = info[action_mask_key], none = no mask; auto = where the "
                               "env's spaces or first reset show one", choices=("auto", "observation", "info", "none"))
    action_mask_key: str = setting("action_mask", "key of the mask of valid actions in the observation or the info "
                                   "(PettingZoo's and gymnasium's name by default)")
    action_mask_input: bool = setting(False, "the mask of valid actions also enters the Q-network's input (by "
                                      "default it only restricts which actions are chosen and maximized over)")
    max_flat_actions: int = setting(MAX_FLAT_ACTIONS, "multi-discrete actions: one Q-value per combination up to this "
                                    "many combinations, else a branching Q-network", ge=1)
    max_branch_outputs: int = setting(MAX_BRANCH_OUTPUTS, "multi-discrete actions: largest branching Q-network, in "
                                      "dimensions x values of the widest dimension; larger spaces are refused",
                                      ge=1)
    learning_rate: float = setting(1e-3, "Adam learning rate", gt=0, le=1)
    gamma: float = setting(0.99, "discount factor per agent step", ge=0, le=1)
    td_loss: str = setting("huber", "TD error loss: huber or mse (squared error)", choices=("huber", "mse"))
    double_dqn: bool = setting(False, "double DQN targets (TF-Agents' DdqnAgent) instead of plain DQN targets")
    action_gap_alpha: float = setting(0.0, "advantage learning: each TD target minus this x (max_b Q(s,b) - Q(s,a)) "
                                      "of the target network; 0 = plain DQN targets", ge=0, le=0.99)
    target_update_period: int = setting(100, "train steps between target-network updates", ge=1)
    target_update_tau: float = setting(1.0, "weight of the online network in each target update; 1.0 = hard copy",
                                       gt=0, le=1)
    gradient_clipping: float | None = setting(10.0, "global-norm gradient clip; none = no clipping", gt=0)
    epsilon_start: float = setting(1.0, "collect-policy epsilon (random-action probability) at train step 0",
                                   ge=0, le=1)
    epsilon_end: float = setting(0.1, "collect-policy epsilon once the decay is over", ge=0, le=1)
    epsilon_decay_steps: int = setting(2000, "train steps over which epsilon decays linearly from start to end", ge=1)
    epsilon_hold_exponent: float = setting(2.0, "an actor holds each random action for a zeta(this)-distributed "
                                           "number of steps, at most to its episode's end (temporally extended "
                                           "epsilon-greedy); 0 = one step each",
                                           ge=0)
    escape_greedy_loops: bool = setting(False, "an actor whose greedy policy brings an env back to an observation met "
                                        "since its last random action starts a random hold there (needs "
                                        "epsilon_hold_exponent)")
    replay_max_size: int = setting(100_000, "replay table capacity, in transitions (the oldest are removed first)",
                                   ge=1)
    replay_min_size: int = setting(1000, "transitions in replay before the learner may sample", ge=1)
    samples_per_insert: float | None = setting(None, "rate limiter: transitions sampled per transition inserted; "
                                               "0 = only wait for replay_min_size; none = auto: 4, raised up to 32 "
                                               "for envs whose timed step is slow", ge=0)
    samples_per_insert_tolerance: float = setting(0.5, "rate limiter: allowed drift from samples_per_insert, as a "
                                                  "fraction of replay_min_size * samples_per_insert", gt=0)
    n_step_update: int = setting(1, "n of the n-step returns; replay items hold n + 1 consecutive steps", ge=1)
    lstm_size: tuple[int, ...] | None = setting(None, "LSTM cell sizes of a recurrent Q-network (TF-Agents' "
                                                "QRnnNetwork), e.g. 32; none = feed-forward", ge=1)
    train_sequence_length: int = setting(8, "with lstm_size: steps per replay item and per training sequence", ge=2)
    prioritized_replay: bool = setting(False, "prioritized replay: sample items by priority, write back |TD error|, "
                                       "weight the loss by importance")
    priority_exponent: float = setting(0.6, "prioritized replay: sampling exponent alpha; 0 = uniform", ge=0, le=1)
    initial_priority: str = setting("auto", "prioritized replay: priority of new items: max (1.0, the top of the "
                                    "scale), td_error (the actor's |TD error|; feed-forward, n_step_update 1 only) or "
                                    "auto (td_error where it applies, else max)", choices=("auto", "max", "td_error"))
    envs_per_item: int = setting(0, "envs whose same-step transitions share one replay item; 1 = one item per env; 0 "
                                 "= auto: 16, or 1 with lstm_size", ge=0)

    def check(self) -> None:
        """Cross-field checks that single-field bounds cannot express."""
        if self.replay_min_size > self.replay_max_size:
            raise ConfigError("replay_min_size", f"must be <= replay_max_size ({self.replay_max_size}); "
                                                 f"got {self.replay_min_size}")
        if self.epsilon_end > self.epsilon_start:
            raise ConfigError("epsilon_end", f"must be <= epsilon_start ({self.epsilon_start})")
        if self.epsilon_hold_exponent != 0 and self.epsilon_hold_exponent <= 1:  # zeta needs an exponent > 1
            raise ConfigError("epsilon_hold_exponent", "must be 0 (one-step random actions) or > 1 (a zeta "
                                                       f"distribution's exponent); got {self.epsilon_hold_exponent}")
        if self.escape_greedy_loops and not self.epsilon_hold_exponent:
            raise ConfigError("escape_greedy_loops", "its random actions are holds: needs epsilon_hold_exponent > 1 "
                                                     "(default 2.0), or escape_greedy_loops false")
        for name in ("replay_address", "control_address"):
            address = getattr(self, name)
            host, _, port = (address or "localhost:8000").rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(name, f"must be host:port, e.g. localhost:8000; got {address!r}")
        if self.shared_key is not None and len(self.shared_key) < MIN_SHARED_KEY_CHARS:
            raise ConfigError("shared_key", f"must be at least {MIN_SHARED_KEY_CHARS} characters (a random one: "
                                            "`openssl rand -hex 32`), or unset for unsigned items")
        if self.layer_norm and self.lstm_size is not None:
            raise ConfigError("layer_norm", "normalises a feed-forward network's hidden layers: leave lstm_size unset, "
                                            "or layer_norm false")
        if not self.fc_layer_params:
            raise ConfigError("fc_layer_params", "needs at least one hidden layer size, e.g. 64,64")
        if self.lstm_size is not None and self.n_step_update != 1:
            raise ConfigError("n_step_update", "must be 1 with an RNN Q-network (lstm_size): TF-Agents 0.19's "
                                               "DqnAgent does not support n-step updates with stateful networks")
        if self.initial_priority == "td_error" and not self.prioritized_replay:
            raise ConfigError("initial_priority", "td_error needs prioritized_replay true (uniform sampling "
                                                  "ignores priorities); or leave it at auto")
        if self.initial_priority == "td_error" and not self.actors_compute_td_errors():
            raise ConfigError("initial_priority", "td_error is computed for 1-step transitions of a feed-forward "
                                                  "Q-network: use n_step_update 1 and no lstm_size, or max/auto")
        if self.lstm_size is not None and self.envs_per_item > 1:
            raise ConfigError("envs_per_item", "must be 1 (or 0 = auto) with an RNN Q-network (lstm_size): its "
                                               "sequences are kept per env stream")
        envs = self.resolved_envs_per_item()
        if self.replay_min_size < envs:
            raise ConfigError("replay_min_size", f"must be >= envs_per_item ({envs}): the table counts whole items")
        if self.compute_dtype == "bfloat16" and self.lstm_size is not None:
            raise ConfigError("compute_dtype", "bfloat16 is for feed-forward Q-networks: with lstm_size use float32")
        if self.lstm_size is not None and not self.lstm_size:
            raise ConfigError("lstm_size", "needs at least one LSTM size, e.g. 32; or none for no RNN")
        if self.conv_layer_params is not None and (not self.conv_layer_params or len(self.conv_layer_params) % 3):
            raise ConfigError("conv_layer_params", "needs filters,kernel,stride triples, e.g. 32,8,4,64,4,2,64,3,1; "
                                                   f"got {','.join(map(str, self.conv_layer_params))!r}")

    def control_address_resolved(self) -> str:
        """Where the control tables (weights, requests, run settings) are: control_address, else the replay server."""
        return self.control_address or self.replay_address

    def auto_batch_size(self) -> int:
        """The learner's batch when batch_size is auto: 256 transitions, or with an RNN as many steps in sequences."""
        if self.lstm_size:
            return max(1, AUTO_BATCH_TRANSITIONS // self.train_sequence_length)
        return AUTO_BATCH_TRANSITIONS

    def unresolved(self) -> list[str]:
        """The settings still at auto that the resolve step decides from the env (AUTO_FROM_ENV)."""
        return [name for name, auto in AUTO_FROM_ENV.items() if getattr(self, name) == auto]

    def resolved_envs_per_item(self) -> int:
        """envs_per_item with auto (0) resolved: 16, or 1 with an RNN (its sequences are per env stream)."""
        return self.envs_per_item or (1 if self.lstm_size else AUTO_ENVS_PER_ITEM)

    def actors_compute_td_errors(self) -> bool:
        """Actors can compute their own TD errors for 1-step transitions of a feed-forward Q-network only."""
        return self.lstm_size is None and self.n_step_update == 1

    def conv_layers(self) -> tuple[tuple[int, int, int], ...] | None:
        """conv_layer_params as TF-Agents' (filters, kernel size, stride) tuples, or None for an MLP."""
        params = self.conv_layer_params
        return None if params is None else tuple(tuple(params[i:i + 3]) for i in range(0, len(params), 3))

    def path(self, *parts: str) -> str:
        """A path under the run directory."""
        return os.path.join(self.root_dir, *parts)
