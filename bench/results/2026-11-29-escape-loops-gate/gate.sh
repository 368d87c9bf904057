#!/bin/bash
# the classic-env gate of escaping greedy loops, one run at a time
R=/work/main/bench/results/2026-11-28-replay-ratio-screen/run.sh
export CODE=/work/wt/gate
for s in 1 2 3 4 5; do echo "$(date -u +%T) C s$s"; bash $R CartPole-v1 60 C-loops $s --escape-greedy-loops true; done
for s in 1 2 3 4 5; do echo "$(date -u +%T) A s$s"; bash $R Acrobot-v1 100 A-loops $s --escape-greedy-loops true; done
for s in 1 2 3 4 5; do echo "$(date -u +%T) M s$s"; bash $R MountainCar-v0 150 M-loops $s --escape-greedy-loops true; done
for s in 1 2 3 4 5; do echo "$(date -u +%T) L s$s"; bash $R LunarLander-v3 150 L-loops $s --escape-greedy-loops true; done
echo "$(date -u +%T) done"
