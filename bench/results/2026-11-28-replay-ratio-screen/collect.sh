#!/bin/bash
# collect.sh OUT [GLOB]: copies the raw evaluator rows and each run's closing lines of the runs named GLOB (by
# default this screen's: [ACDML]-*-s?) into OUT/raw/<env>/<run>/; the first letter of a run's name gives its env
out=$1
glob=${2:-'[ACDML]-*-s?'}
mkdir -p $out/raw
for d in /work/screen/runs/$glob; do
  [ -d $d ] || continue
  n=$(basename $d)
  case $n in A-*|D-*) e=Acrobot-v1;; C-*) e=CartPole-v1;; M-*) e=MountainCar-v0;; L-*) e=LunarLander-v3;; T-*) e=Taxi-v4;; esac
  [ -f $d/evaluator/evals.jsonl ] || continue
  mkdir -p $out/raw/$e/$n
  cp $d/evaluator/evals.jsonl $out/raw/$e/$n/
  grep -E "^summary:|^exit codes:|^dqn-service local:|replay ratio|samples_per_insert" $d.log > $out/raw/$e/$n/closing.txt
done
