"""Atari training aids on the real Breakout ROM: a lost life ends the episode but not the game, FIRE at each start,
rewards clipped to their sign; evaluation plays whole games with unclipped scores."""

import numpy as np

from dqn.envs.making import EnvOptions, make_gym_env
from dqn.settings.config import EvaluatorConfig
from evaluator.evaluate import evaluation_protocol

BREAKOUT = "ALE/Breakout-v5"
NOOP, FIRE = 0, 1


def play_until(env, stop, actions=(FIRE, 2, 3), limit=20_000):
    """Steps random actions until stop(terminated, truncated, reward) holds; returns (steps, rewards, last flags)."""
    rng = np.random.default_rng(0)
    rewards = []
    for step in range(1, limit + 1):
        _, reward, terminated, truncated, _ = env.step(int(rng.choice(actions)))
        rewards.append(reward)
        if stop(terminated, truncated, reward):
            return step, rewards, (terminated, truncated)
    raise AssertionError(f"no stop within {limit} steps")


def test_a_lost_life_ends_the_episode_and_the_next_reset_goes_on_with_the_same_game():
    env = make_gym_env(BREAKOUT, EnvOptions(atari_terminal_on_life_loss=True))
    ale = env.unwrapped.ale
    env.reset(seed=0)
    assert ale.lives() == 5
    _, _, (terminated, _) = play_until(env, lambda terminated, truncated, _: terminated or truncated)
    assert terminated and ale.lives() == 4  # the episode ended at the first lost life, not at game over
    frame = ale.getEpisodeFrameNumber()
    env.reset()
    assert ale.lives() == 4 and ale.getEpisodeFrameNumber() > frame  # the same game, a few frames on
    for _ in range(4):  # the remaining lives: each ends one episode; then a reset starts a new game
        play_until(env, lambda terminated, truncated, _: terminated or truncated)
        env.reset()
    assert ale.lives() == 5 and ale.getEpisodeFrameNumber() < frame
    play_until(env, lambda terminated, truncated, _: terminated or truncated)
    env.reset(seed=1)  # a seeded reset starts the episodes again: a new game
    assert ale.lives() == 5
    env.close()


def test_without_the_aid_an_episode_is_the_whole_game():
    env = make_gym_env(BREAKOUT, EnvOptions())
    env.reset(seed=0)
    play_until(env, lambda terminated, truncated, _: terminated or truncated)
    assert env.unwrapped.ale.lives() == 0
    env.close()


def frames_after_noops(options: EnvOptions, noops: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """(observation after reset, observation after `noops` NOOP steps) of Breakout under `options`."""
    env = make_gym_env(BREAKOUT, options)
    first, _ = env.reset(seed=0)
    for _ in range(noops):
        last, *_ = env.step(NOOP)
    env.close()
    return first, last


def test_fire_on_reset_puts_the_ball_in_play():
    # Breakout serves only on FIRE: with NOOPs alone the screen stays still; after the aid's FIRE the ball moves.
    still = frames_after_noops(EnvOptions(atari_frame_stack=1, atari_noop_max=0))
    moving = frames_after_noops(EnvOptions(atari_frame_stack=1, atari_noop_max=0, atari_fire_on_reset=True))
    np.testing.assert_array_equal(*still)
    assert not np.array_equal(*moving)


def test_clipped_rewards_are_signs_and_unclipped_ones_are_the_game_score():
    # Space Invaders scores 5 to 30 a hit (Breakout's random play rarely reaches the bricks worth more than 1).
    rewards = {}
    for clip in (True, False):
        env = make_gym_env("ALE/SpaceInvaders-v5", EnvOptions(atari_clip_rewards=clip, atari_frame_stack=1))
        env.reset(seed=3)
        _, seen, _ = play_until(env, lambda _terminated, _truncated, reward: reward != 0, actions=(FIRE,))
        rewards[clip] = seen[-1]
        env.close()
    assert rewards[True] == 1.0 and rewards[False] >= 5.0


def test_fire_on_reset_leaves_games_without_fire_alone():
    env = make_gym_env("ALE/Freeway-v5", EnvOptions(atari_fire_on_reset=True))
    assert "FireOnReset" not in str(env)
    env.close()


def test_evaluation_plays_whole_games_with_unclipped_scores_and_keeps_fire():
    config = EvaluatorConfig(env_id=BREAKOUT, observation_history=1, action_mask="none",
                             atari_terminal_on_life_loss=True, atari_clip_rewards=True, atari_fire_on_reset=True)
    _, options = evaluation_protocol(config)
    assert not options.atari_terminal_on_life_loss and not options.atari_clip_rewards
    assert options.atari_fire_on_reset
