"""Evaluator role: policy episodes (greedy, or epsilon 0.05 on Atari) whenever the published train step advances."""
