"""Documented settings for every role. Each field is a flag (`--env-id`) and an env var (`DQN_ENV_ID`).

`CommonConfig` holds everything that shapes the data (env, network, replay layout): every role
builds the same specs and table signatures from it, so no role waits for another's files.
Defaults are tuned for CartPole-v1 on a 2-core CPU machine; docs/defaults.md says why each is what it is.
Each `setting` help is one line: what it does and its unit (`--help` adds the accepted values, env var, default).
"""

from __future__ import annotations

import dataclasses
import os

from dqn.model.exploration import check_hold_exponent
from dqn.replay_layout.items import ItemShape, actors_compute_td_errors
from dqn.settings.loading import ConfigError, setting
from dqn.settings.presets import PRESET_NAMES

#: Each role's directory under root_dir (summaries, progress file, its resolved config.json).
ROLE_DIRS = {"replay-server": "replay", "learner": "learner", "evaluator": "evaluator"}


def role_dir(role: str) -> str:
    """The directory of a non-actor role under the run root."""
    return ROLE_DIRS[role]


def actor_dir(actor_id: int) -> str:
    """The directory of actor `actor_id` under the run root: one per actor id, kept across restarts."""
    return f"actor-{actor_id}"


#: Transitions per SGD step when batch_size is auto; with an RNN, sequences holding about as many steps.
AUTO_BATCH_TRANSITIONS = 256


@dataclasses.dataclass(frozen=True)
class CommonConfig:
    """Settings every role shares; they fix specs, signatures and the variable layout."""

    root_dir: str = setting("runs/cartpole", "run directory for logs, summaries, checkpoints and the resolved "
                            "config.json")
    env_id: str = setting("CartPole-v1", "gymnasium environment id (module:Id imports module first); needs "
                          "Discrete actions")
    seed: int = setting(0, "base random seed; each actor and env derives its own from it", ge=0)
    replay_address: str = setting("localhost:8000", "host:port of the replay server (the replay data)")
    control_address: str | None = setting(None, "host:port of a server serving the variables and learner_requests "
                                          "tables (weights, reset requests), as the replay server does; none = "
                                          "replay_address")
    rpc_timeout_s: float = setting(10.0, "deadline of one remote call to the replay server, in seconds", gt=0)
    connect_timeout_s: float = setting(120.0, "seconds to wait for the replay server at start before exiting with "
                                       "code 1", gt=0)
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
    learning_rate: float = setting(1e-3, "Adam learning rate", gt=0, le=1)
    gamma: float = setting(0.99, "discount factor per agent step", ge=0, le=1)
    td_loss: str = setting("huber", "TD error loss: huber or mse (squared error)", choices=("huber", "mse"))
    double_dqn: bool = setting(False, "double DQN targets (TF-Agents' DdqnAgent) instead of plain DQN targets")
    action_gap_alpha: float | None = setting(None, "advantage learning: each TD target minus this x (max_b Q(s,b) "
                                             "- Q(s,a)) of the target network; 0 = plain targets; none = auto: 0.9 "
                                             "where random play shows an action that changes nothing, else 0",
                                             ge=0, le=0.99)
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

    def control_address_resolved(self) -> str:
        """Where the `variables` and `learner_requests` tables are: control_address, by default the replay server."""
        return self.control_address or self.replay_address

    def check(self) -> None:
        """Cross-field checks that single-field bounds cannot express."""
        if self.replay_min_size > self.replay_max_size:
            raise ConfigError("replay_min_size", f"must be <= replay_max_size ({self.replay_max_size}); "
                                                 f"got {self.replay_min_size}")
        if self.epsilon_end > self.epsilon_start:
            raise ConfigError("epsilon_end", f"must be <= epsilon_start ({self.epsilon_start})")
        if (problem := check_hold_exponent(self.epsilon_hold_exponent)) is not None:
            raise ConfigError("epsilon_hold_exponent", problem)
        for name in ("replay_address", "control_address"):
            address = getattr(self, name)
            host, _, port = (address or "localhost:8000").rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(name, f"must be host:port, e.g. localhost:8000; got {address!r}")
        if not self.fc_layer_params:
            raise ConfigError("fc_layer_params", "needs at least one hidden layer size, e.g. 64,64")
        if self.lstm_size is not None and self.n_step_update != 1:
            raise ConfigError("n_step_update", "must be 1 with an RNN Q-network (lstm_size): TF-Agents 0.19's "
                                               "DqnAgent does not support n-step updates with stateful networks")
        if self.initial_priority == "td_error" and not self.prioritized_replay:
            raise ConfigError("initial_priority", "td_error needs prioritized_replay true (uniform sampling "
                                                  "ignores priorities); or leave it at auto")
        if self.initial_priority == "td_error" and not actors_compute_td_errors(self):
            raise ConfigError("initial_priority", "td_error is computed for 1-step transitions of a feed-forward "
                                                  "Q-network: use n_step_update 1 and no lstm_size, or max/auto")
        if self.lstm_size is not None and self.envs_per_item > 1:
            raise ConfigError("envs_per_item", "must be 1 (or 0 = auto) with an RNN Q-network (lstm_size): its "
                                               "sequences are kept per env stream")
        envs = ItemShape.from_config(self).envs_per_item
        if self.replay_min_size < envs:
            raise ConfigError("replay_min_size", f"must be >= envs_per_item ({envs}): the table counts whole items")
        if self.compute_dtype == "bfloat16" and self.lstm_size is not None:
            raise ConfigError("compute_dtype", "bfloat16 is for feed-forward Q-networks: with lstm_size use float32")
        if self.lstm_size is not None and not self.lstm_size:
            raise ConfigError("lstm_size", "needs at least one LSTM size, e.g. 32; or none for no RNN")
        if self.conv_layer_params is not None and (not self.conv_layer_params or len(self.conv_layer_params) % 3):
            raise ConfigError("conv_layer_params", "needs filters,kernel,stride triples, e.g. 32,8,4,64,4,2,64,3,1; "
                                                   f"got {','.join(map(str, self.conv_layer_params))!r}")

    def conv_layers(self) -> tuple[tuple[int, int, int], ...] | None:
        """conv_layer_params as TF-Agents' (filters, kernel size, stride) tuples, or None for an MLP."""
        params = self.conv_layer_params
        return None if params is None else tuple(tuple(params[i:i + 3]) for i in range(0, len(params), 3))

    def path(self, *parts: str) -> str:
        """A path under the run directory."""
        return os.path.join(self.root_dir, *parts)


@dataclasses.dataclass(frozen=True)
class ReplayServerConfig(CommonConfig):
    """The Reverb server: tables, checkpoints, health."""

    port: int = setting(8000, "TCP port the Reverb server listens on", ge=1, le=65535)
    health_port: int = setting(8001, "TCP port of the grpc.health.v1 service; 0 = disabled", ge=0, le=65535)
    checkpoint_dir: str | None = setting(None, "directory of replay checkpoints; none = <root_dir>/replay_checkpoints")
    checkpoint_interval_s: float = setting(300.0, "seconds between periodic replay checkpoints; 0 = only at stop", ge=0)
    stats_interval_s: float = setting(30.0, "seconds between table statistics log lines", gt=0)
    on_corrupt_checkpoint: str = setting("fail", "if the latest replay checkpoint is unreadable: fail (exit 1 naming "
                                         "it) or quarantine (move it aside, load the previous one or start empty)",
                                         choices=("fail", "quarantine"))

    def resolved_checkpoint_dir(self) -> str:
        """Where replay checkpoints live."""
        return self.checkpoint_dir or self.path("replay_checkpoints")


@dataclasses.dataclass(frozen=True)
class LearnerConfig(CommonConfig):
    """The learner: dataset, train step, publishing, checkpoints, summaries."""

    batch_size: int = setting(0, "transitions per SGD step (sequences with lstm_size); 0 = auto: 256, or 256 / "
                              "train_sequence_length sequences with lstm_size", ge=0)
    replay_dataset: str = setting("streams", "learner input: streams (parallel Reverb TrajectoryDatasets, batched in "
                                  "C++) or as_dataset (ReverbReplayBuffer.as_dataset)",
                                  choices=("streams", "as_dataset"))
    num_parallel_calls: int = setting(0, "parallel Reverb sample streams; with streams it must divide the items per "
                                      "batch; 0 = auto (1 with block items, 2 with one env per item, 3 with "
                                      "as_dataset)", ge=0)
    prefetch: int = setting(3, "batches prefetched ahead of the train step", ge=0)
    train_steps_per_call: int = setting(1, "SGD steps per tf.function call; each call samples batch_size * this "
                                        "transitions", ge=1)
    intra_op_threads: int = setting(0, "TensorFlow threads inside one op; 0 = auto (1 on 2 or fewer cores, else TF's "
                                    "default)", ge=0)
    inter_op_threads: int = setting(0, "TensorFlow threads running independent ops; 0 = auto (4 on 2 or fewer cores, "
                                    "else TF's default)", ge=0)
    max_train_steps: int = setting(100_000, "stop after this many train steps", ge=1)
    publish_interval: int = setting(50, "train steps between weight publications to the variables table", ge=1)
    checkpoint_interval: int = setting(10_000, "train steps between learner checkpoints", ge=1)
    export_interval: int = setting(50_000, "train steps between greedy-policy SavedModel exports; 0 = never", ge=0)
    summary_interval: int = setting(100, "train steps between TensorBoard summaries", ge=1)
    importance_exponent_start: float = setting(0.4, "prioritized replay: importance-weight exponent beta at step 0, "
                                               "annealed linearly to 1", ge=0, le=1)
    importance_anneal_steps: int = setting(0, "prioritized replay: train steps over which beta reaches 1; 0 = "
                                           "max_train_steps", ge=0)
    no_data_timeout_s: float = setting(30.0, "seconds without a new batch before the learner logs 'no new data'", gt=0)
    health_port: int = setting(0, "TCP port of the grpc.health.v1 service; 0 = disabled", ge=0, le=65535)

    def check(self) -> None:
        """The parallel sample streams must fit (as_dataset) or divide (streams) the sampled batch."""
        super().check()
        total = self.train_batch_size() * self.train_steps_per_call
        calls = self.parallel_calls()
        if calls > total:
            raise ConfigError("num_parallel_calls", f"must be <= batch_size * train_steps_per_call ({total})")
        if self.replay_dataset == "streams" and total % calls:
            raise ConfigError("num_parallel_calls", f"must divide batch_size * train_steps_per_call ({total}) with "
                                                    "replay_dataset streams (each stream samples an equal share): "
                                                    "set it to 1, or pick a batch size it divides")
        envs = ItemShape.from_config(self).envs_per_item
        if total % envs:
            raise ConfigError("envs_per_item", f"must divide batch_size * train_steps_per_call ({total}): batches "
                                               f"are whole items of {envs} transitions; got {envs}")
        if self.replay_dataset == "streams" and (total // envs) % calls:
            raise ConfigError("num_parallel_calls", f"must divide the items per sampled batch ({total // envs} "
                                                    f"items of {envs} transitions) with replay_dataset streams")

    def tf_threads(self, cpus: int | None = None) -> tuple[int, int]:
        """(intra-op, inter-op) TensorFlow threads with auto (0) resolved; 0 in the result = TF's default.

        On 2 cores the learner shares the machine with actors and the replay server: one thread per op keeps its
        small matmuls off TF's shared pool, and 4 inter-op threads let the feed's staging run beside the step.
        """
        cpus = cpus or len(os.sched_getaffinity(0))
        few = cpus <= 2
        return (self.intra_op_threads or (1 if few else 0), self.inter_op_threads or (4 if few else 0))

    def train_batch_size(self) -> int:
        """batch_size with auto (0) resolved: 256 transitions, or with an RNN as many steps in whole sequences."""
        if self.batch_size:
            return self.batch_size
        if self.lstm_size:
            return max(1, AUTO_BATCH_TRANSITIONS // self.train_sequence_length)
        return AUTO_BATCH_TRANSITIONS

    def parallel_calls(self) -> int:
        """num_parallel_calls with auto (0) resolved for the input pipeline and replay layout."""
        if self.num_parallel_calls:
            return self.num_parallel_calls
        envs = ItemShape.from_config(self).envs_per_item
        items = max(1, self.train_batch_size() * self.train_steps_per_call // envs)
        if self.replay_dataset == "as_dataset":
            return min(3, items)
        return 2 if envs == 1 and items % 2 == 0 else 1


@dataclasses.dataclass(frozen=True)
class ActorConfig(CommonConfig):
    """An actor: N parallel envs, batched epsilon-greedy inference, replay items of sequence_length steps."""

    actor_id: int = setting(0, "index of this actor (seeds, log dir actor-<id>, Ape-X epsilon); -1 = the replica "
                            "number in the pod/container name (StatefulSet ordinal, Compose replica)", ge=-1)
    num_actors: int = setting(2, "actors in the system (for the Ape-X per-actor epsilon)", ge=1)
    num_envs: int = setting(32, "environments this actor steps in parallel", ge=1)
    warmup_steps: int = setting(1000, "env steps per actor with a uniformly random policy before the Q-network acts",
                                ge=0)
    weights_refresh_interval: int = setting(400, "env steps between pulls of the latest published weights", ge=1)
    weights_refresh_interval_s: float = setting(0.1, "seconds between pulls of the latest weights, whichever of this "
                                                "and weights_refresh_interval comes first", gt=0)
    max_pending_items: int = setting(8, "unconfirmed replay items per stream (env or block of envs) before the actor "
                                     "waits; one writer holds at most 32", ge=1)
    max_env_steps: int = setting(0, "stop after this many env steps; 0 = run until stopped", ge=0)
    inference: str = setting("auto", "collect-policy inference: auto = numpy for plain MLP Q-networks, else a TF "
                             "graph call; graph = always the graph call", choices=("auto", "graph"))
    apex_epsilon: bool = setting(False, "Ape-X per-actor epsilon: eps_i = apex_base_epsilon^(1 + 7 f_i), f_i = i/(K-1) "
                                 "for ids i < num_actors K, else i's van der Corput fraction (distinct at any scale)")
    apex_base_epsilon: float = setting(0.4, "Ape-X base epsilon", ge=0, le=1)
    summary_interval_s: float = setting(5.0, "seconds between actor summaries", gt=0)
    health_port: int = setting(0, "TCP port of the grpc.health.v1 service; 0 = disabled", ge=0, le=65535)
    max_env_restarts: int = setting(20, "sub-env restarts (an env that raised is recreated) allowed within "
                                    "env_restart_window before the actor exits 1; 0 = the first env error ends it",
                                    ge=0)
    env_restart_window: int = setting(10_000, "env steps (all of this actor's envs) over which max_env_restarts "
                                      "counts", ge=1)

    def check(self) -> None:
        """Each replay item holds envs_per_item of this actor's envs."""
        super().check()
        envs = ItemShape.from_config(self).envs_per_item
        if self.num_envs % envs:
            raise ConfigError("num_envs", f"must be a multiple of envs_per_item ({envs}): each replay "
                                          f"item holds that many envs' transitions; got {self.num_envs}. Pick "
                                          "another --num-envs, or --envs-per-item 1 for one item per env")

    def resolved_actor_id(self) -> int:
        """actor_id, or for -1 the replica number of this pod/container (replicas share one config).

        The replica number comes from the container's or pod's name (dqn/settings/identity.py).
        """
        if self.actor_id >= 0:
            return self.actor_id
        from dqn.settings.identity import (
            stable_actor_id,  # DNS only when asked: a lookup is no part of parsing a config
        )

        return stable_actor_id()


@dataclasses.dataclass(frozen=True)
class EvaluatorConfig(CommonConfig):
    """The evaluator: greedy episodes whenever the published train step advances."""

    eval_interval: int = setting(100, "train steps between evaluations: newer weights are evaluated once this far "
                                 "past the last evaluated", ge=1)
    eval_episodes: int = setting(10, "greedy episodes per evaluation", ge=1)
    eval_confirm_episodes: int = setting(30, "fresh episodes that re-check a new best evaluation reaching "
                                         "target_return (any new best if there is none); 0 = no re-check", ge=0)
    target_return: float | None = setting(None, "the return to reach: `local` stops once an evaluation "
                                          "and its re-check reach it; none = the env's reward_threshold")
    eval_epsilon: float | None = setting(
        None, "evaluation policy's random-action probability; none = auto: 0.05 for Atari ids (Nature DQN), "
              "0 (greedy) otherwise", ge=0, le=1)
    eval_max_episode_steps: int = setting(
        0, "cap on an evaluation episode in agent steps; 0 = auto: as training, for Atari ids at most 18,000 frames / "
           "atari_frame_skip, for envs with no limit 10,000", ge=0)
    fallback_reset_patience: int = setting(
        500, "a run stuck partway to its target starts afresh (new Q-network, empty replay, epsilon restarted) "
           "after this many train steps below halfway to its best, or four times as many stalled low; 0 = never",
        ge=0)
    poll_interval_s: float = setting(0.1, "seconds between checks for newer weights; short enough that evaluations "
                                     "keep the eval_interval cadence", gt=0)
    health_port: int = setting(0, "TCP port of the grpc.health.v1 service; 0 = disabled", ge=0, le=65535)

    def resolved_target_return(self, reward_threshold: float | None) -> float | None:
        """target_return, else the env's reward_threshold: one rule, so the evaluator re-checks where `local` stops."""
        return self.target_return if self.target_return is not None else reward_threshold


@dataclasses.dataclass(frozen=True)
class LocalConfig(LearnerConfig, ActorConfig, EvaluatorConfig, ReplayServerConfig):
    """The whole topology as separate processes on this machine (free loopback ports)."""

    tensorboard: bool = setting(False, "also start TensorBoard on 127.0.0.1 and print its URL")
    tensorboard_port: int = setting(6006, "TensorBoard's TCP port on 127.0.0.1", ge=1, le=65535)
    max_wall_time_s: float = setting(0.0, "stop after this many seconds; 0 = no limit", ge=0)
    max_role_restarts: int = setting(3, "restarts of a role that exited non-zero (with backoff) allowed within "
                                     "role_restart_window_s; one more exit ends the run; 0 = no restarts", ge=0)
    role_restart_window_s: float = setting(300.0, "seconds over which max_role_restarts counts a role's restarts",
                                           gt=0)


ALL_CONFIG_CLASSES = (CommonConfig, ReplayServerConfig, LearnerConfig, ActorConfig, EvaluatorConfig, LocalConfig)
