"""Actor role: parallel envs, batched epsilon-greedy inference, 2-step items into Reverb."""
