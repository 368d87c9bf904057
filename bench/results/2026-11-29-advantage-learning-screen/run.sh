#!/bin/bash
# usage: run.sh ENV BUDGET TAG SEED flags...
env=$1; budget=$2; tag=$3; seed=$4; shift 4
root=/work/screen/runs/$tag-s$seed
rm -rf $root
cd ${CODE:-/work/main} && PYTHONPATH=. timeout $((budget+60)) /work/main/.venv/bin/python -m launcher local --env-id $env --seed $seed --max-wall-time-s $budget --target-return 1e9 --root-dir $root "$@" > $root.log 2>&1
python3 - $root <<'PY'
import json,sys
root=sys.argv[1]
rows=[json.loads(l) for l in open(root+'/evaluator/evals.jsonl')]
n=len(rows); half=rows[n//2:]
vals=[r['average_return'] for r in half]
import statistics
print(root.split('/')[-1], 'evals', n, 'last-half median', statistics.median(vals), 'mean', round(statistics.mean(vals),1), 'final3', [r['average_return'] for r in rows[-3:]], 'steps', rows[-1]['train_step'])
PY
