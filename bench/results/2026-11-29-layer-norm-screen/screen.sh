#!/bin/bash
# the layer-norm screen, same-day defaults and candidate one after the other per seed (order alternating by seed);
# no run starts after 23:10 UTC
R=/work/main/bench/results/2026-11-28-replay-ratio-screen/run.sh
export CODE=/work/wt/ln
pair() { # env budget letter seed
  local first=today second=layernorm
  if [ $(( $4 % 2 )) -eq 0 ]; then first=layernorm; second=today; fi
  for tag in $first $second; do
    if [ "$(date -u +%H%M)" -ge 2310 ]; then echo "$(date -u +%T) no time for $3-$tag s$4"; return; fi
    echo "$(date -u +%T) $3-$tag s$4"
    if [ $tag = layernorm ]; then bash $R $1 $2 $3-$tag $4 --layer-norm true; else bash $R $1 $2 $3-$tag $4; fi
  done
}
for s in 1 2 3 4 5; do pair CartPole-v1 60 C $s; done
for s in 1 2 3 4 5; do pair Acrobot-v1 100 A $s; done
echo "$(date -u +%T) done"
