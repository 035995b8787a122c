#!/usr/bin/env bash
# A/B of the cold full Adult audit on a lent GPU machine: an older code (the tree of this
# checkout with .abgpu/old.patch applied: `git diff -R <old rev> -- fairengine flows tasks
# templates > .abgpu/old.patch`) against this checkout, alternating, on the same machine, each a
# fresh process (benchmarks/full_audit_adult.py). Set-up as in gpu_full_audit.sh (.whl and
# .devdata carried; .abgpu listed in .git/info/exclude and carried too). RUNS="1 2" sets the
# rounds. Writes each run's results and log to $OUT.
set -uo pipefail
mkdir -p /tmp/site
for w in .whl/*.whl; do python3 -m zipfile -e "$w" /tmp/site; done
mkdir -p /tmp/old && tar --exclude=./.whl -cf - . | tar -xf - -C /tmp/old
(cd /tmp/old && git apply .abgpu/old.patch 2>&1 || patch -p1 -E < .abgpu/old.patch) | tail -2
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=
nproc; nvidia-smi --query-gpu=name --format=csv,noheader || true
python3 -c "import os; print('affinity', len(os.sched_getaffinity(0)))"
# compile bytecode once so neither side pays it
PYTHONPATH=/tmp/site:$PWD python3 -c "import flows.audit, prefect.server.api.server, mlflow.sklearn, great_expectations" >/dev/null 2>&1
for i in ${RUNS:-1 2}; do
  for tree in old new; do
    dir=$PWD; [ $tree = old ] && dir=/tmp/old
    (cd $dir && PYTHONPATH=/tmp/site:$dir python3 benchmarks/full_audit_adult.py --adult $OLDPWD/.devdata/adult \
       --out "$OUT/ab_${tree}_$i.md" > "$OUT/ab_${tree}_$i.log" 2>&1); echo "rc=$?"
    echo "== $tree $i"; grep -E "Wall time|^\| (fliptest|decide) " "$OUT/ab_${tree}_$i.md" | head -6
  done
done
