#!/bin/bash
while kill -0 1034 2>/dev/null; do sleep 5; done
R=/work/main/bench/results/2026-11-28-replay-ratio-screen/run.sh
export CODE=/work/wt/gate
for s in 1 2 3 4 5; do echo "$(date -u +%T) A-default s$s"; bash $R Acrobot-v1 100 A-default-today $s; done
echo "$(date -u +%T) done"
