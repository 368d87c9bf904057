"""Learner role: Reverb dataset -> DqnAgent train step; weight publishing, checkpoints, summaries."""
