"""Random play's score on the run's env: the least a kept policy must beat, measured once per run.

A learned policy can end below uniformly random valid actions, for example a greedy policy that repeats an action
which changes nothing until the episode's cap, and its evaluation numbers alone do not show it. So the evaluator
plays random valid actions once, on its re-check episodes (its evaluation episodes where there is no re-check),
before it scores any weights, and keeps the result in `random_play.json`; a restarted evaluator reads it instead
of playing again. When the evaluator stops it compares the kept policy's score with it, and `dqn-service local`'s
summary does too (`kept_below_random_play`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time

import numpy as np

from dqn.files import atomic_write
from evaluator.best import BEST_POLICY_FILE, kept_score
from evaluator.episodes import RANDOM_PLAY_STREAM, PolicyEpisodes
from evaluator.metrics import AverageReturn

log = logging.getLogger("evaluator")
RANDOM_PLAY_FILE = "random_play.json"


def random_play_seed(seed: int) -> int:
    """Env seeds of random play: apart from the evaluations' and the re-checks' episodes."""
    return int(np.random.SeedSequence([seed, RANDOM_PLAY_STREAM]).generate_state(1)[0])


def read_random_play(directory: str) -> dict | None:
    """The random-play record in `directory` ({"average_return", "episodes", ...}), or None if there is none yet."""
    try:
        with open(os.path.join(directory, RANDOM_PLAY_FILE), encoding="utf-8") as handle:
            record = json.load(handle)
        return record if math.isfinite(float(record["average_return"])) else None
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def measure_random_play(episodes: PolicyEpisodes, seed: int, stop_requested) -> dict | None:
    """Random play's record, played on `episodes`.

    None if a stop request cut the episodes short or an env fault ended every one of them.
    """
    started, env_seed = time.monotonic(), random_play_seed(seed)
    values = episodes.run_random(env_seed, stop_requested)
    if stop_requested() or not episodes.whole_episodes:
        return None
    record = {"average_return": values[AverageReturn.name], "episodes": episodes.whole_episodes,
              "seed": env_seed, "seconds": round(time.monotonic() - started, 3)}
    log.info("random play: average return %s over %d episodes of uniformly random valid actions (%.1f s): the "
             "least a kept policy must score", format_return(record["average_return"]), record["episodes"],
             record["seconds"])
    return record


def save_random_play(directory: str, record: dict) -> None:
    """Writes the record where `read_random_play` finds it (whole or not at all)."""
    with atomic_write(os.path.join(directory, RANDOM_PLAY_FILE)) as handle:
        json.dump(record, handle)


def format_return(value: float) -> str:
    """A return as the lines show it: one decimal, or 3 significant digits below 1, so 0.0 and 0.03 differ."""
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.1f}"


def kept_below_random_play(directory: str) -> str | None:
    """One line when the kept policy (best_policy.json) scores below random play on the same env, else None."""
    random_play = read_random_play(directory)
    try:
        with open(os.path.join(directory, BEST_POLICY_FILE), encoding="utf-8") as handle:
            kept = json.load(handle)
    except (FileNotFoundError, ValueError):
        return None
    if random_play is None or not isinstance(kept, dict) or "train_step" not in kept:
        return None
    confirmed = kept.get("confirmed_return")
    score = kept_score(kept["average_return"], confirmed)
    scored_on = "its evaluation episodes" if confirmed is None else "fresh re-check episodes"
    if score >= random_play["average_return"]:
        return None
    return (f"the kept policy (train step {kept['train_step']}) scores {format_return(score)} on {scored_on}, below "
            f"random play's {format_return(random_play['average_return'])} over {random_play['episodes']} episodes "
            "of uniformly random valid actions on this env: worse than no training; look at its greedy actions "
            "(`dqn-service policy-check`) before using it")
