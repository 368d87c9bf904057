#!/bin/bash
# copies the raw evaluator rows and each run's closing lines into the results folder
out=$1
mkdir -p $out/raw
for d in /work/screen/runs/[ACDML]-*-s?; do
  n=$(basename $d)
  case $n in A-*|D-*) e=Acrobot-v1;; C-*) e=CartPole-v1;; M-*) e=MountainCar-v0;; L-*) e=LunarLander-v3;; esac
  [ -f $d/evaluator/evals.jsonl ] || continue
  mkdir -p $out/raw/$e/$n
  cp $d/evaluator/evals.jsonl $out/raw/$e/$n/
  grep -E "^summary:|^exit codes:|^dqn-service local:|replay ratio|samples_per_insert" $d.log > $out/raw/$e/$n/closing.txt
done
cp /work/screen/run.sh $out/
