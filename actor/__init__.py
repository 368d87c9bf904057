"""Actor role: parallel envs, batched epsilon-greedy inference, 2-step (or n + 1-step) items into Reverb."""
