"""The fair harness's sides: how each trains and is scored, which envs each fits, and the order of a seed's runs.

- `ours`: `dqn-service local` with its defaults (a mask is found without flags); `ours-unmasked`: the same with
  `--action-mask none` (the mask left unread: an illegal action does whatever the env does with it).
- `ours-candidate`: the defaults plus the sitting's `--candidate-flags` (a proposed default, judged against `ours`
  in the same sitting; the flags are recorded in the sitting's row).
- `sb3`, `sb3-scaled`: SB3 DQN with rl-baselines3-zoo's or the published recipe for the env
  (bench/peers/sb3_snapshots.py), the second with the recipe's schedule scaled to the env steps `sb3` reached for
  the same env, seed and budget: in the same sitting, or without `sb3` in it, in an earlier one of the same results
  (runs long enough to need a sitting each).
- `maskable-ppo`: sb3-contrib's MaskablePPO with its library defaults, the mask through `ActionMasker`.
- `sb3-dqn-flat`: SB3 DQN over a MultiDiscrete env's combinations as one Discrete space (bench/action_kinds.py's
  `FlatActions`), with the zoo's DQN recipe for the env it discretises.

An env's kind picks its sides where none are given: `masked` (a mask in its Dict observation or its first reset's
info) ours, ours-unmasked and maskable-ppo; `multi-discrete` (a MultiDiscrete or Tuple action space) ours and
sb3-dqn-flat; `plain` ours, sb3 and sb3-scaled.
"""

from __future__ import annotations

import json
import os

from bench.peers.sb3_snapshots import NO_RECIPE_SWEEP, RECIPE_VARIANTS, has_recipe, takes_sweep

SIDES = ("ours", "ours-unmasked", "ours-plain", "ours-candidate", "sb3", "sb3-scaled", "maskable-ppo", "sb3-dqn-flat")
#: What each auto setting that changes how the service learns picks where its rule does not fire (the plain
#: learner); the mask is the env's own convention, not such a rule.
PLAIN_PICKS = {"observation_history": 1, "image_encoding": "scaled", "samples_per_insert": 4.0}
#: The service's sides and the flags each adds to the run's command line. `ours-plain` is the plain learner, so that
#: a sitting of ours against it shows what the rules that fire on an env buy there.
OURS_FLAGS = {"ours": [], "ours-unmasked": ["--action-mask", "none"],
              "ours-plain": [part for name, pick in PLAIN_PICKS.items() for part in (f"--{name.replace('_', '-')}",
                                                                                      str(pick))],
              "ours-candidate": []}  # the sitting's --candidate-flags are added by bench/fair_run.py
#: The peer sides and the algorithm bench/peers/sb3_snapshots.py trains for each.
PEER_ALGOS = {"sb3": "dqn", "sb3-scaled": "dqn", "maskable-ppo": "maskable-ppo", "sb3-dqn-flat": "dqn-flat"}
#: The sides of each env kind, where --sides does not name them.
KIND_SIDES = {"plain": ("ours", "sb3", "sb3-scaled"), "masked": ("ours", "ours-unmasked", "maskable-ppo"),
              "multi-discrete": ("ours", "sb3-dqn-flat")}
#: Marks random-play rows drawn apart from the env's generator (bench/fair_tables.py prefers them).
RANDOM_DRAWS = "own stream"


def own_flags(side: str, candidate_flags: list[str]) -> list[str]:
    """The flags one of the service's sides adds to its command line (the candidate's come from the sitting)."""
    return OURS_FLAGS[side] + (candidate_flags if side == "ours-candidate" else [])


def evaluator_side(side: str) -> str:
    """bench/fair_eval.py's --side for a trained side: the service's, SB3's DQN (flat or not), or MaskablePPO."""
    if side in OURS_FLAGS:
        return "ours"
    return "maskable-ppo" if side == "maskable-ppo" else "sb3"


def kept_side(side: str) -> str:
    """The score rows' side of the policy a service run kept and exported."""
    return f"{side}-kept"


def env_kind(env_id: str) -> str:
    """`masked`, `multi-discrete` or `plain`, from the env's spaces and its first seeded reset."""
    import gymnasium as gym

    from bench.action_kinds import bare_id, env_mask

    env = gym.make(bare_id(env_id))
    try:
        if isinstance(env.action_space, gym.spaces.MultiDiscrete | gym.spaces.Tuple):
            return "multi-discrete"
        return "masked" if env_mask(*env.reset(seed=0)) is not None else "plain"
    finally:
        env.close()


def misfit(side: str, kind: str) -> str | None:
    """Why `side` cannot run on an env of `kind`, or None."""
    if side in ("ours", "ours-plain", "ours-candidate") or (side == "ours-unmasked" and kind == "masked"):
        return None
    if side in KIND_SIDES[kind]:
        return None
    return f"side {side} needs an env of kind {' or '.join(k for k, s in KIND_SIDES.items() if side in s)}"


def side_order(sides: list[str], position: int) -> list[str]:
    """A seed's order of runs: `ours` at index position % n among the other sides, those in their given order.

    So `ours` runs first, second, ... and last in turn over the seeds, and `sb3` always before `sb3-scaled`
    (which needs its env steps).
    """
    others = [side for side in sides if side != "ours"]
    if "ours" not in sides:
        return others
    index = position % len(sides)
    return [*others[:index], "ours", *others[index:]]


def peer_recipe_problem(sides: dict[str, list[str]], peer_recipe: str | None) -> str | None:
    """Why a sitting's --peer-recipe does not fit its envs' sb3 sides.

    A setting of the sweep is for envs with no published recipe of their own (none, or only the nearest), a variant
    of a recipe for envs with one.
    """
    dqn_peers = [env_id for env_id, own in sides.items() if {"sb3", "sb3-scaled"} & set(own)]
    with_recipe = [env_id for env_id in dqn_peers if has_recipe(env_id)]
    if peer_recipe in RECIPE_VARIANTS:
        if not dqn_peers or len(with_recipe) < len(dqn_peers):
            return f"--peer-recipe {peer_recipe} changes the recipe of an env that has one, for its sb3 sides"
        return None
    if peer_recipe and (not dqn_peers or not all(takes_sweep(env_id) for env_id in dqn_peers)):
        return "--peer-recipe is for the sb3 sides on envs with no rl-baselines3-zoo or published recipe of their own"
    if not peer_recipe and len(with_recipe) < len(dqn_peers):
        return (f"an env without an rl-baselines3-zoo or published DQN recipe needs --peer-recipe (one of "
                f"{NO_RECIPE_SWEEP})")
    return None


def earlier_sb3_run(runs_path: str, env_id: str, seed: int, budget_s: float, peer_recipe: str | None) -> dict | None:
    """The row of the latest finished `sb3` run in `runs_path` for this env, seed, budget and recipe, or None."""
    if not os.path.exists(runs_path):
        return None
    with open(runs_path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    found = [row for row in rows if row.get("kind") == "run" and row.get("side") == "sb3" and row.get("exit_code") == 0
             and row.get("env_steps") and row["env_id"] == env_id and row["seed"] == seed
             and row["budget_s"] == budget_s and row.get("peer_recipe") == peer_recipe]
    return found[-1] if found else None
