#!/bin/bash
# 1) escaping-loops judging, stocks-v0 seeds 4 5 (checkout e8342b0)
# 2) layer-norm screen, MountainCar-v0 150 s and LunarLander-v3 150 s (checkout 44dfb21), pairs alternating by seed
# 3) ratio-8 judging, forex-v0 (checkout 7470636 = f47f3d3 + scorer)
PY=/work/main/.venv/bin/python
echo "$(date -u +%T) escape stocks 4 5"
cd /work/wt/esc && PYTHONPATH=. $PY bench/fair_run.py --envs gym_anytrading:stocks-v0 --budget-s 240 --sides ours ours-candidate \
  --candidate-flags "--escape-greedy-loops true" --seeds 4 5 --out /work/main/bench/results/2026-11-29-judge-escape-loops \
  > /work/screen/jl-stocks45.out 2>&1
echo "$(date -u +%T) escape done rc=$?"
R=/work/main/bench/results/2026-11-28-replay-ratio-screen/run.sh
export CODE=/work/wt/ln
pair() { # env budget letter seed
  local first=today second=layernorm
  if [ $(( $4 % 2 )) -eq 0 ]; then first=layernorm; second=today; fi
  for tag in $first $second; do
    echo "$(date -u +%T) $3-$tag s$4"
    if [ $tag = layernorm ]; then bash $R $1 $2 $3-$tag $4 --layer-norm true; else bash $R $1 $2 $3-$tag $4; fi
  done
}
for s in 1 2 3 4 5; do pair MountainCar-v0 150 M $s; done
for s in 1 2 3 4 5; do pair LunarLander-v3 150 L $s; done
echo "$(date -u +%T) screen done"
if [ "$(date -u +%H%M)" -ge 0150 ] && [ "$(date -u +%H%M)" -lt 1200 ]; then echo "$(date -u +%T) no time for forex"; exit; fi
echo "$(date -u +%T) ratio-8 forex"
cd /work/wt/r8 && PYTHONPATH=. $PY bench/fair_run.py --envs gym_anytrading:forex-v0 --budget-s 240 --sides ours ours-candidate \
  --candidate-flags "--samples-per-insert 8" --seeds 1 2 3 4 5 --out /work/main/bench/results/2026-11-29-judge-ratio-8 \
  > /work/screen/r8-forex.out 2>&1
echo "$(date -u +%T) forex done rc=$?"
