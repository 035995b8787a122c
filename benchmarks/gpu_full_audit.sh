#!/usr/bin/env bash
# The cold full Adult audit (benchmarks/full_audit_adult.py) on a lent GPU machine, whose image has
# Python 3.12 with torch, numpy, pandas, scikit-learn, scipy and matplotlib but not Prefect, MLflow,
# Great Expectations, POT or highspy: those travel as Python 3.12 wheels in .whl/ (unzipped into
# /tmp/site, first on the path) and the Adult files in .devdata/adult. Writes the results to $OUT.
set -euo pipefail
mkdir -p /tmp/site
for w in .whl/*.whl; do python3 -m zipfile -e "$w" /tmp/site; done
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=
python3 - <<'PY'
import torch, prefect, mlflow, great_expectations, ot, highspy
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "prefect", prefect.__version__,
      "mlflow", mlflow.__version__, "gx", great_expectations.__version__, "pot", ot.__version__)
PY
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
for i in ${RUNS:-1}; do
  python3 benchmarks/full_audit_adult.py --adult .devdata/adult --out "$OUT/full_audit_adult_gpu_$i.md" 2>&1 \
    | grep -v -i "warning" | tail -n 8
done
