"""Documented settings for every role. Each field is a flag (`--env-id`) and an env var (`DQN_ENV_ID`).

`CommonConfig` holds everything that shapes the data (env, network, replay layout): every role
builds the same specs and table signatures from it, so no role waits for another's files.
Defaults are tuned for CartPole-v1 on a 2-core CPU box; each says where it comes from.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import zlib

from dqn.configuration import ConfigError, setting
from dqn.presets import PRESET_NAMES

#: Items of the book's setup: 2 consecutive steps = one transition with its next observation (num_steps=2).
#: With n-step returns items are longer: use `CommonConfig.sequence_length()`.
SEQUENCE_LENGTH = 2


@dataclasses.dataclass(frozen=True)
class CommonConfig:
    """Settings every role shares; they fix specs, signatures and the variable layout."""

    root_dir: str = setting("runs/cartpole", "run directory: logs, summaries, checkpoints, config.json")
    env_id: str = setting("CartPole-v1", "gymnasium env id (Discrete actions, Box observations)")
    seed: int = setting(0, "base random seed; each actor/env derives its own from it", ge=0)
    replay_address: str = setting("localhost:8000", "host:port of the replay server")
    rpc_timeout_s: float = setting(10.0, "deadline for one remote call to the replay server", gt=0)
    connect_timeout_s: float = setting(120.0, "give up (exit 1) if the replay server does not answer at start "
                                              "within this many seconds", gt=0)
    preset: str | None = setting(
        None, "named settings applied below --config/env/flags (dqn/presets.py; breakout = the book's / Nature "
              "DQN's Atari setup); none = the dataclass defaults", choices=PRESET_NAMES)
    max_episode_steps: int = setting(0, "truncate episodes after this many agent steps; 0 = the env's own limit "
                                        "(the book's Breakout: 27000 = ALE-v5's 108k-frame cap)", ge=0)
    atari_noop_max: int = setting(30, "Atari only: up to this many no-op actions at reset (AtariPreprocessing; "
                                      "Nature DQN's no-op max 30)", ge=0)
    atari_frame_skip: int = setting(4, "Atari only: frames per agent action, max-pooled over the last 2 "
                                       "(AtariPreprocessing; Nature DQN's action repeat 4)", ge=1)
    atari_screen_size: int = setting(84, "Atari only: observations are resized to this square (Nature DQN: 84)",
                                     ge=8)
    atari_grayscale: bool = setting(True, "Atari only: grayscale frames (Nature DQN's luminance channel)")
    atari_terminal_on_life_loss: bool = setting(
        False, "Atari only: end an episode at each lost life (Nature DQN did for training; gymnasium's and the "
               "book's AtariPreprocessing default off)")
    atari_frame_stack: int = setting(4, "Atari only: last frames stacked as channels (the book's FrameStack4; "
                                        "Nature DQN's agent history length 4)", ge=1)
    atari_repeat_action_probability: float = setting(
        0.25, "Atari only: sticky-action probability (ALE-v5's default, Machado et al. 2018; the book's "
              "BreakoutNoFrameskip-v4 and Nature DQN: 0)", ge=0, le=1)
    conv_layer_params: tuple[int, ...] | None = setting(
        None, "Q-network conv layers as filters,kernel,stride triples, e.g. 32,8,4,64,4,2,64,3,1 (Nature DQN); "
              "for image observations, uint8 scaled to [0, 1] inside the network; none = an MLP", ge=1)
    fc_layer_params: tuple[int, ...] = setting(
        (256, 256), "Q-network hidden layer sizes (rl-zoo's tuned CartPole DQN net; best peak in our sweep)", ge=1)
    observation_scaling: str = setting(
        "narrow", "MLP Q-networks: bounds = divide each observation feature by its Box bound (max of |low|, |high|; "
                  "features unbounded or bounded beyond 1e6 pass as they are) inside the network, so replay and "
                  "exported policies keep raw observations. CartPole's cart position (4.8) and pole angle (0.42 rad) "
                  "then span [-1, 1]; bench/learning_sim.py seeds 1-16 solved 11/16 at 700-2,200 train steps, "
                  "unscaled 10/15 at 1,000-3,100; bench/time_to_solve.py, 4 runs of seeds 1-5: medians 12.5-16.1 s, "
                  "5/5 within 120 s each (README Performance). narrow = only features bounded within 1, scaled up "
                  "(docs/learning.md). none = raw observations (the book). Conv networks "
                  "scale uint8 images by 1/255 either way",
        choices=("bounds", "narrow", "none"))
    learning_rate: float = setting(1e-3, "Adam learning rate (the notebook's 1e-3; fastest CartPole solves in our "
                                         "sweep once evaluation runs every 100 steps and catches the first peak)",
                                   gt=0, le=1)
    gamma: float = setting(0.99, "discount factor (DQN paper 0.99)", ge=0, le=1)
    td_loss: str = setting("huber", "TD error loss: huber (DQN paper's clipping) or mse (the notebook)",
                           choices=("huber", "mse"))
    double_dqn: bool = setting(False, "double DQN (van Hasselt et al. 2016, TF-Agents' DdqnAgent); off by default: "
                                      "with batch 256 the service solved CartPole on 4/6 seeds within 150 s with plain "
                                      "DQN (55-72 s), on 2/6 within 200 s with double DQN (bench/time_to_solve.py)")
    target_update_period: int = setting(100, "train steps between hard target-network updates (notebook: 50; "
                                              "100 solved CartPole fastest in our sweep, 200 was slower)", ge=1)
    target_update_tau: float = setting(1.0, "target update mix; 1.0 = hard copy as in the DQN paper", gt=0, le=1)
    gradient_clipping: float | None = setting(10.0, "global-norm gradient clip; none to disable", gt=0)
    epsilon_start: float = setting(1.0, "collect-policy epsilon at train step 0", ge=0, le=1)
    epsilon_end: float = setting(0.1, "collect-policy epsilon after the decay (TF-Agents' CartPole example: 0.1; "
                                      "keeps failure states in the buffer)", ge=0, le=1)
    epsilon_decay_steps: int = setting(2000, "train steps over which epsilon decays linearly (notebook: 1600)",
                                       ge=1)
    replay_max_size: int = setting(100_000, "replay table capacity in transitions (FIFO removal)", ge=1)
    replay_min_size: int = setting(1000, "transitions stored before the learner may sample", ge=1)
    samples_per_insert: float = setting(
        4.0, "rate limiter: sampled per inserted transition; 0 = only a min-size limiter. 4 = batch_size / 4 env "
             "steps per SGD step (64 at batch 256; 16 fresh steps per SGD step learned worse in bench/learning_sim.py; "
             "without a limiter actors starve the learner)", ge=0)
    samples_per_insert_tolerance: float = setting(
        0.5, "with samples_per_insert > 0: allowed drift as a fraction of min size * spi", gt=0)
    n_step_update: int = setting(
        1, "n-step returns (DqnAgent's n_step_update): replay items and the learner's dataset hold n + 1 "
           "consecutive steps, derived in one place (sequence_length); 1 = the book's 2-step items", ge=1)
    lstm_size: tuple[int, ...] | None = setting(
        None, "stateful Q-network (TF-Agents' QRnnNetwork) with these LSTM cell sizes, e.g. 32; actors carry one "
              "policy state per env (reset at episode start) and replay holds train_sequence_length-step "
              "sequences; none = a feed-forward Q-network", ge=1)
    train_sequence_length: int = setting(
        8, "with lstm_size: steps per replay item and per sampled training sequence (the RNN unrolls over "
           "them from a zero state, TF-Agents' DqnAgent way)", ge=2)
    prioritized_replay: bool = setting(
        False, "prioritized replay (Schaul et al. 2016 / Ape-X): Reverb Prioritized sampler, new items at max "
               "priority, learner writes back |TD error| and applies importance weights")
    priority_exponent: float = setting(0.6, "prioritized replay: sampling exponent alpha (PER / Ape-X: 0.6)",
                                       ge=0, le=1)
    initial_priority: str = setting(
        "auto", "prioritized replay: priority of new items: max (PER: the top of the priority scale), td_error "
                "(Ape-X: the actor's own |TD error| from its Q-values, scaled like the learner's; feed-forward "
                "networks with n_step_update 1 only) or auto (td_error where it applies, else max; td_error "
                "solved CartPole on 2 of 4 seeds in 42-45 s, max on 1 in 149 s: README DQN variants)",
        choices=("auto", "max", "td_error"))
    envs_per_item: int = setting(
        0, "envs whose same-time transitions share one replay item ([n + 1, E, ...] blocks): Reverb's per-item "
           "cost is paid once per E transitions (learner input 10x+ faster, README Performance); sampling, "
           "priorities and FIFO removal act on blocks. 1 = one item per env stream, the TF-Agents observer's "
           "layout; 0 = auto: 16, or 1 with lstm_size", ge=0)

    def check(self) -> None:
        """Cross-field checks that single-field bounds cannot express."""
        if self.replay_min_size > self.replay_max_size:
            raise ConfigError("replay_min_size", f"must be <= replay_max_size ({self.replay_max_size}); "
                                                 f"got {self.replay_min_size}")
        if self.epsilon_end > self.epsilon_start:
            raise ConfigError("epsilon_end", f"must be <= epsilon_start ({self.epsilon_start})")
        host, _, port = self.replay_address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError("replay_address", f"must be host:port, e.g. localhost:8000; got {self.replay_address!r}")
        if not self.fc_layer_params:
            raise ConfigError("fc_layer_params", "needs at least one hidden layer size, e.g. 64,64")
        if self.lstm_size is not None and self.n_step_update != 1:
            raise ConfigError("n_step_update", "must be 1 with an RNN Q-network (lstm_size): TF-Agents 0.19's "
                                               "DqnAgent does not support n-step updates with stateful networks")
        if self.initial_priority == "td_error" and not self.prioritized_replay:
            raise ConfigError("initial_priority", "td_error needs prioritized_replay true (uniform sampling "
                                                  "ignores priorities); or leave it at auto")
        if self.initial_priority == "td_error" and not self._actors_can_compute_td_errors():
            raise ConfigError("initial_priority", "td_error is computed for 1-step transitions of a feed-forward "
                                                  "Q-network: use n_step_update 1 and no lstm_size, or max/auto")
        if self.lstm_size is not None and self.envs_per_item > 1:
            raise ConfigError("envs_per_item", "must be 1 (or 0 = auto) with an RNN Q-network (lstm_size): its "
                                               "sequences are kept per env stream")
        if self.replay_min_size < self.item_envs():
            raise ConfigError("replay_min_size", f"must be >= envs_per_item ({self.item_envs()}): the table "
                                                 "counts whole items")
        if self.lstm_size is not None and not self.lstm_size:
            raise ConfigError("lstm_size", "needs at least one LSTM size, e.g. 32; or none for no RNN")
        if self.conv_layer_params is not None and (not self.conv_layer_params or len(self.conv_layer_params) % 3):
            raise ConfigError("conv_layer_params", "needs filters,kernel,stride triples, e.g. 32,8,4,64,4,2,64,3,1; "
                                                   f"got {','.join(map(str, self.conv_layer_params))!r}")

    def conv_layers(self) -> tuple[tuple[int, int, int], ...] | None:
        """conv_layer_params as TF-Agents' (filters, kernel size, stride) tuples, or None for an MLP."""
        params = self.conv_layer_params
        return None if params is None else tuple(tuple(params[i:i + 3]) for i in range(0, len(params), 3))

    def sequence_length(self) -> int:
        """Steps per replay item and sampled sequence: n + 1, or train_sequence_length for an RNN.

        The one place every role derives it from, so writers, tables and datasets always agree.
        """
        return self.train_sequence_length if self.lstm_size else self.n_step_update + 1

    def item_envs(self) -> int:
        """Envs per replay item (envs_per_item with auto resolved): 1 = per-env streams, > 1 = env blocks."""
        if self.envs_per_item:
            return self.envs_per_item
        return 1 if self.lstm_size else 16

    def replay_items(self, transitions: int) -> int:
        """A count of transitions as whole replay items (rounded up), for table sizes and limiter thresholds."""
        return -(-transitions // self.item_envs())

    def items_run_past_episode_end(self) -> bool:
        """n-step items start at every step of an episode and may reach into the next (see dqn/nstep.py)."""
        return self.n_step_update > 1

    def _actors_can_compute_td_errors(self) -> bool:
        return self.lstm_size is None and self.n_step_update == 1

    def actors_send_priorities(self) -> bool:
        """Replay items carry the actor's initial priority in `policy_info` (see actor/td_priority.py)."""
        if not self.prioritized_replay or self.initial_priority == "max":
            return False
        return self.initial_priority == "td_error" or self._actors_can_compute_td_errors()

    def path(self, *parts: str) -> str:
        """A path under the run directory."""
        return os.path.join(self.root_dir, *parts)


@dataclasses.dataclass(frozen=True)
class ReplayServerConfig(CommonConfig):
    """The Reverb server: tables, checkpoints, health."""

    port: int = setting(8000, "port the Reverb server listens on", ge=1, le=65535)
    health_port: int = setting(8001, "port of the grpc.health.v1 service; 0 disables it", ge=0, le=65535)
    checkpoint_dir: str | None = setting(None, "replay checkpoints; default <root_dir>/replay_checkpoints")
    checkpoint_interval_s: float = setting(300.0, "seconds between periodic replay checkpoints; 0 = only on stop",
                                           ge=0)
    stats_interval_s: float = setting(30.0, "seconds between table statistics log lines", gt=0)
    on_corrupt_checkpoint: str = setting("fail", "latest replay checkpoint unreadable: fail (exit 1 naming the file) "
                                                 "or quarantine (move it aside, load the previous one or start empty)",
                                         choices=("fail", "quarantine"))

    def resolved_checkpoint_dir(self) -> str:
        """Where replay checkpoints live."""
        return self.checkpoint_dir or self.path("replay_checkpoints")


@dataclasses.dataclass(frozen=True)
class LearnerConfig(CommonConfig):
    """The learner: dataset, train step, publishing, checkpoints, summaries."""

    batch_size: int = setting(
        256, "transitions per SGD step (the book: 64). 256: with samples_per_insert 4 that is 64 fresh env steps "
             "per SGD step; bench/learning_sim.py solved CartPole in 7 of 12 seeds within 6,000 train steps "
             "(batch 64: 1 of 6)", ge=1)
    replay_dataset: str = setting(
        "streams", "learner input: streams (num_parallel_calls Reverb TrajectoryDatasets, each batching its "
                   "share in C++) or as_dataset (the book's ReverbReplayBuffer.as_dataset); see README Performance",
        choices=("streams", "as_dataset"))
    num_parallel_calls: int = setting(
        0, "parallel Reverb sample streams; with replay_dataset streams it must divide the items per batch. 0 = auto: "
           "1 with block items (a second stream gained nothing), 2 with envs_per_item 1 (1.4x the SGD steps/s of "
           "one, bench/learner_throughput.py), 3 with as_dataset (the book's)", ge=0)
    prefetch: int = setting(3, "batches prefetched ahead of the train step (the book: 3)", ge=0)
    train_steps_per_call: int = setting(1, "SGD steps per tf.function call; each call samples batch_size * this",
                                        ge=1)
    intra_op_threads: int = setting(
        0, "TensorFlow threads inside one op; 0 = auto: 1 on a machine of 2 or fewer cores (with inter_op_threads "
           "auto, 4: 1.26x the service's SGD steps/s of TF's default on 2 cores, README Performance), TF's default "
           "(one per core) on more", ge=0)
    inter_op_threads: int = setting(0, "TensorFlow threads running independent ops; 0 = auto: 4 on 2 or fewer "
                                        "cores, TF's default (one per core) on more", ge=0)
    max_train_steps: int = setting(
        100_000, "stop after this many train steps (~7 min at the service's ~230 SGD steps/s on 2 cores)", ge=1)
    publish_interval: int = setting(50, "train steps between weight publications to the variables table", ge=1)
    checkpoint_interval: int = setting(
        10_000, "train steps between learner checkpoints (~45 s at ~230 SGD steps/s; each keeps ~14 KB of learner "
                "memory on Python 3.11, README Memory over long runs)", ge=1)
    export_interval: int = setting(
        50_000, "train steps between greedy-policy SavedModel exports; 0 = never (each export keeps ~0.75 MiB of "
                "learner memory, TF on Python 3.11: every ~3.6 min at ~230 SGD steps/s)", ge=0)
    summary_interval: int = setting(100, "train steps between TensorBoard summaries", ge=1)
    importance_exponent_start: float = setting(
        0.4, "prioritized replay: importance-weight exponent beta at step 0, annealed to 1 (PER: 0.4)", ge=0, le=1)
    importance_anneal_steps: int = setting(0, "prioritized replay: train steps to anneal beta to 1; 0 = "
                                              "max_train_steps (PER anneals over the whole run)", ge=0)
    no_data_timeout_s: float = setting(30.0, "wait for a batch this long before logging 'no new data'", gt=0)
    health_port: int = setting(0, "port of the grpc.health.v1 service; 0 disables it", ge=0, le=65535)

    def check(self) -> None:
        """The parallel sample streams must fit (as_dataset) or divide (streams) the sampled batch."""
        super().check()
        total = self.batch_size * self.train_steps_per_call
        calls = self.parallel_calls()
        if calls > total:
            raise ConfigError("num_parallel_calls", f"must be <= batch_size * train_steps_per_call ({total})")
        if self.replay_dataset == "streams" and total % calls:
            raise ConfigError("num_parallel_calls", f"must divide batch_size * train_steps_per_call ({total}) with "
                                                    "replay_dataset streams (each stream samples an equal share): "
                                                    "set it to 1, or pick a batch size it divides")
        envs = self.item_envs()
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

    def parallel_calls(self) -> int:
        """num_parallel_calls with auto (0) resolved for the input pipeline and replay layout."""
        if self.num_parallel_calls:
            return self.num_parallel_calls
        items = max(1, self.batch_size * self.train_steps_per_call // self.item_envs())
        if self.replay_dataset == "as_dataset":
            return min(3, items)
        return 2 if self.item_envs() == 1 and items % 2 == 0 else 1


@dataclasses.dataclass(frozen=True)
class ActorConfig(CommonConfig):
    """An actor: N parallel envs, batched epsilon-greedy inference, items of sequence_length steps per env stream."""

    actor_id: int = setting(0, "index of this actor (seeds, log dir actor-<id>, Ape-X epsilon); -1 = derive a "
                                  "stable id from the hostname (scaled compose/Kubernetes replicas)", ge=-1)
    num_actors: int = setting(2, "actors in the system (for per-actor epsilon)", ge=1)
    num_envs: int = setting(32, "parallel environments in this actor process (32: with 2 actors every env "
                                "advances one step per SGD step, so long episodes reach replay early; "
                                "bench/learning_sim.py solved 7/12 seeds at 32, 4/12 at 64, 2/12 at 128, and "
                                "bench/time_to_solve.py 8/16 quick solves and 14/16 within 150 s at 32 against "
                                "6/16 and 12/16 at 64, seeds paired; "
                                "64 wrote 1.1x the transitions/s per actor in bench/actor_throughput.py)", ge=1)
    warmup_steps: int = setting(1000, "random-policy env steps per actor before using the Q-network "
                                      "(the book warms up with a random policy)", ge=0)
    weights_refresh_interval: int = setting(400, "env steps between weight refreshes", ge=1)
    max_pending_items: int = setting(8, "unconfirmed items per stream (env, or block of envs) before the actor "
                                        "waits: backpressure from the replay rate limiter. 8: at 64 envs the actor "
                                        "wrote ~16 percent more than with 4 (bench/actor_throughput.py); a writer "
                                        "holds at most 32 whatever this is", ge=1)
    max_env_steps: int = setting(0, "stop after this many env steps; 0 = run until stopped", ge=0)
    inference: str = setting(
        "auto", "how the actor runs its collect policy: auto = in numpy when the Q-network is a plain MLP that "
                "dqn/host_policy.py mirrors exactly (~0.1 ms per step at 32 envs against ~0.58 ms for a graph "
                "call), else the TF-Agents policy in one graph call; graph = always the graph call",
        choices=("auto", "graph"))
    apex_epsilon: bool = setting(False, "Ape-X per-actor epsilon: eps_i = apex_base^(1 + 7 i/(K-1))")
    apex_base_epsilon: float = setting(0.4, "Ape-X base epsilon (Horgan et al. 2018: 0.4)", ge=0, le=1)
    summary_interval_s: float = setting(5.0, "seconds between actor summaries", gt=0)
    health_port: int = setting(0, "port of the grpc.health.v1 service; 0 disables it", ge=0, le=65535)


    def check(self) -> None:
        """Each replay item holds envs_per_item of this actor's envs."""
        super().check()
        if self.num_envs % self.item_envs():
            raise ConfigError("num_envs", f"must be a multiple of envs_per_item ({self.item_envs()}): each replay "
                                          f"item holds that many envs' transitions; got {self.num_envs}. Pick "
                                          "another --num-envs, or --envs-per-item 1 for one item per env")

    def resolved_actor_id(self) -> int:
        """actor_id, or for -1 a stable id from the hostname (replicas share one config)."""
        if self.actor_id >= 0:
            return self.actor_id
        return zlib.crc32(socket.gethostname().encode()) % 1_000_000


@dataclasses.dataclass(frozen=True)
class EvaluatorConfig(CommonConfig):
    """The evaluator: greedy episodes whenever the published train step advances."""

    eval_interval: int = setting(100, "train steps between evaluations (10 greedy CartPole episodes cost ~0.3 s in "
                                      "one batched env; frequent evals catch the first solving policy)", ge=1)
    eval_episodes: int = setting(10, "greedy episodes per evaluation", ge=1)
    eval_epsilon: float | None = setting(
        None, "evaluation policy's random-action probability; none = auto: 0.05 for Atari ids (Nature DQN), "
              "0 (greedy) otherwise", ge=0, le=1)
    eval_max_episode_steps: int = setting(
        0, "cap on an evaluation episode in agent steps; 0 = auto: as training (max_episode_steps), for Atari ids at "
           "most 18,000 frames / atari_frame_skip (Nature DQN's 5 minutes)", ge=0)
    poll_interval_s: float = setting(0.5, "seconds between checks for newer weights", gt=0)
    health_port: int = setting(0, "port of the grpc.health.v1 service; 0 disables it", ge=0, le=65535)


@dataclasses.dataclass(frozen=True)
class LocalConfig(LearnerConfig, ActorConfig, EvaluatorConfig, ReplayServerConfig):
    """The whole topology as separate processes on this machine (free loopback ports)."""

    tensorboard: bool = setting(False, "also start TensorBoard on 127.0.0.1 and print its URL")
    tensorboard_port: int = setting(6006, "TensorBoard port (on 127.0.0.1)", ge=1, le=65535)
    target_return: float | None = setting(None, "stop once eval average return reaches this; "
                                                "default: the env's reward_threshold")
    max_wall_time_s: float = setting(0.0, "stop after this many seconds; 0 = no limit", ge=0)


ALL_CONFIG_CLASSES = (CommonConfig, ReplayServerConfig, LearnerConfig, ActorConfig, EvaluatorConfig, LocalConfig)
