"""Evaluator role: greedy-policy episodes whenever the published train step advances."""
