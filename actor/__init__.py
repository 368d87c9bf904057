"""Actor role: parallel envs, batched epsilon-greedy inference, replay items (blocks of envs by default) into Reverb."""
