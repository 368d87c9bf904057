"""Documented settings for every role. Each field is a flag (`--env-id`) and an env var (`DQN_ENV_ID`).

Each role's settings are `CommonConfig` (dqn/settings/common.py: what every role shares) plus its own; `XConfig`
adds the health port of a role started on its own. Defaults are tuned for CartPole-v1 on a 2-core CPU machine;
docs/defaults.md says why each is what it is.
"""

from __future__ import annotations

import dataclasses
import os

from dqn.settings.common import CommonConfig
from dqn.settings.loading import ConfigError, setting

#: Each role's directory under root_dir (summaries, progress file, its resolved config.json).
ROLE_DIRS = {"replay-server": "replay", "learner": "learner", "evaluator": "evaluator"}


def role_dir(role: str) -> str:
    """The directory of a non-actor role under the run root."""
    return ROLE_DIRS[role]


def actor_dir(actor_id: int) -> str:
    """The directory of actor `actor_id` under the run root: one per actor id, kept across restarts."""
    return f"actor-{actor_id}"


@dataclasses.dataclass(frozen=True)
class HealthConfig:
    """A role's own health endpoint; not `local`'s, which picks its replay server's and leaves the others off."""

    health_port: int = setting(0, "TCP port of this role's grpc.health.v1 service; 0 = disabled", ge=0, le=65535)
    health_host: str = setting("", "address the health service listens on, e.g. 127.0.0.1; empty = every interface "
                               "(what probes from outside a container need)")
    health_stall_timeout_s: float = setting(300.0, "the health service turns NOT_SERVING while the role's main loop "
                                            "has not completed a pass for this many seconds (a liveness probe then "
                                            "restarts it); 0 = never", ge=0)


@dataclasses.dataclass(frozen=True)
class ReplayServerSettings(CommonConfig):
    """The Reverb server: tables, checkpoints (what `local` takes of it: all but the health port)."""

    port: int = setting(8000, "TCP port the Reverb server listens on", ge=1, le=65535)
    checkpoint_dir: str | None = setting(None, "directory of replay checkpoints; none = <root_dir>/replay_checkpoints")
    checkpoint_interval_s: float = setting(300.0, "seconds between periodic replay checkpoints; 0 = only at stop", ge=0)
    stats_interval_s: float = setting(30.0, "seconds between table statistics log lines", gt=0)
    on_corrupt_checkpoint: str = setting("fail", "if the latest replay checkpoint is unreadable: fail (exit 1 naming "
                                         "it) or quarantine (move it aside, load the previous one or start empty)",
                                         choices=("fail", "quarantine"))
    learner_speed_wait_s: float = setting(300.0, "slow env, auto replay ratio, roles started apart: seconds to wait at "
                                          "first start for the learner to report its own speed (then it is timed "
                                          "here); 0 = time it here", ge=0)
    replay_memory_check: str = setting("refuse", "at start, the full replay's estimated size against the memory "
                                       "limit of the cgroup (container): refuse to start (exit 2) when it does not "
                                       "fit, only warn, or off; it warns from 80% of the limit",
                                       choices=("refuse", "warn", "off"))

    def resolved_checkpoint_dir(self) -> str:
        """Where replay checkpoints live."""
        return self.checkpoint_dir or self.path("replay_checkpoints")

    def resolved_quarantine_dir(self) -> str:
        """Where an unreadable replay checkpoint is set aside: the server's folder of the run root.

        The run root is a volume of its own in every deployment; the checkpoint directory's other entries are
        deleted by Reverb, and its parent is the image's read-only root file system in the containers.
        """
        return self.path(role_dir("replay-server"), "quarantine")

    def check(self) -> None:
        """The checkpoint directory is the server's alone (Reverb deletes what else it holds): not the run root."""
        super().check()
        checkpoints, root = os.path.abspath(self.resolved_checkpoint_dir()), os.path.abspath(self.root_dir)
        if root == checkpoints or root.startswith(checkpoints + os.sep):
            raise ConfigError("checkpoint_dir", f"{self.resolved_checkpoint_dir()} holds the run root {self.root_dir}: "
                                                "Reverb deletes everything in it but its latest checkpoint. Give "
                                                "it a directory of its own, e.g. <root_dir>/replay_checkpoints "
                                                "(the default)")


@dataclasses.dataclass(frozen=True)
class LearnerSettings(CommonConfig):
    """The learner: dataset, train step, publishing, checkpoints, summaries (all but the health port)."""

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
        envs = self.resolved_envs_per_item()
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
        return self.batch_size or self.auto_batch_size()

    def parallel_calls(self) -> int:
        """num_parallel_calls with auto (0) resolved for the input pipeline and replay layout."""
        if self.num_parallel_calls:
            return self.num_parallel_calls
        envs = self.resolved_envs_per_item()
        items = max(1, self.train_batch_size() * self.train_steps_per_call // envs)
        if self.replay_dataset == "as_dataset":
            return min(3, items)
        return 2 if envs == 1 and items % 2 == 0 else 1


@dataclasses.dataclass(frozen=True)
class ActorSettings(CommonConfig):
    """An actor: N parallel envs, batched epsilon-greedy inference, replay items (all but the health port)."""

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
    max_env_restarts: int = setting(20, "sub-env restarts (an env that raised is recreated) allowed within "
                                    "env_restart_window before the actor exits 1; 0 = the first env error ends it",
                                    ge=0)
    env_restart_window: int = setting(10_000, "env steps (all of this actor's envs) over which max_env_restarts "
                                      "counts", ge=1)

    def check(self) -> None:
        """Each replay item holds envs_per_item of this actor's envs."""
        super().check()
        envs = self.resolved_envs_per_item()
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
class EvaluatorSettings(CommonConfig):
    """The evaluator: greedy episodes whenever the published train step advances (all but the health port)."""

    eval_interval: int = setting(100, "train steps between evaluations: newer weights are evaluated once this far "
                                 "past the last evaluated", ge=1)
    eval_episodes: int = setting(10, "greedy episodes per evaluation", ge=1)
    eval_confirm_episodes: int = setting(30, "fresh episodes that re-check a new best evaluation within one "
                                         "standard error of target_return (any new best if there is none); the "
                                         "re-check decides a solve; 0 = no re-check", ge=0)
    target_return: float | None = setting(None, "the return to reach: `local` stops once an evaluation's "
                                          "re-check reaches it (the evaluation itself without re-checks); none = "
                                          "the env's reward_threshold")
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

    def resolved_target_return(self, reward_threshold: float | None) -> float | None:
        """target_return, else the env's reward_threshold: one rule, so the evaluator re-checks where `local` stops."""
        return self.target_return if self.target_return is not None else reward_threshold


@dataclasses.dataclass(frozen=True)
class ReplayServerConfig(HealthConfig, ReplayServerSettings):
    """The Reverb server: tables, checkpoints, health."""


@dataclasses.dataclass(frozen=True)
class LearnerConfig(HealthConfig, LearnerSettings):
    """The learner: dataset, train step, publishing, checkpoints, summaries, health."""


@dataclasses.dataclass(frozen=True)
class ActorConfig(HealthConfig, ActorSettings):
    """An actor: N parallel envs, batched epsilon-greedy inference, replay items of sequence_length steps, health."""


@dataclasses.dataclass(frozen=True)
class EvaluatorConfig(HealthConfig, EvaluatorSettings):
    """The evaluator: greedy episodes whenever the published train step advances, health."""


@dataclasses.dataclass(frozen=True)
class LocalConfig(LearnerSettings, ActorSettings, EvaluatorSettings, ReplayServerSettings):
    """The whole topology as separate processes on this machine (free loopback ports); no health port of its own."""

    tensorboard: bool = setting(False, "also start TensorBoard on 127.0.0.1 and print its URL")
    tensorboard_port: int = setting(6006, "TensorBoard's TCP port on 127.0.0.1", ge=1, le=65535)
    isolate_network: bool = setting(True, "run the roles in a network namespace of their own where the kernel "
                                    "allows it: no other host reaches them, nor do envs reach the network; false = "
                                    "this host's network")
    max_wall_time_s: float = setting(0.0, "stop after this many seconds; 0 = no limit", ge=0)
    max_role_restarts: int = setting(3, "restarts of a role that exited non-zero (with backoff) allowed within "
                                     "role_restart_window_s; one more exit ends the run; 0 = no restarts", ge=0)
    role_restart_window_s: float = setting(300.0, "seconds over which max_role_restarts counts a role's restarts",
                                           gt=0)


ALL_CONFIG_CLASSES = (CommonConfig, ReplayServerConfig, LearnerConfig, ActorConfig, EvaluatorConfig, LocalConfig)
