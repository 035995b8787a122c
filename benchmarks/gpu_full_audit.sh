#!/usr/bin/env bash
# The cold full Adult audit (benchmarks/full_audit_adult.py) on a lent GPU machine, whose image has
# Python 3.12 with torch, numpy, pandas, scikit-learn, scipy and matplotlib but not Prefect, MLflow,
# Great Expectations, POT or highspy: those travel as Python 3.12 wheels in .whl/ (unzipped into
# /tmp/site, first on the path) and the Adult files in .devdata/adult. Writes the results to $OUT.
#
# Preparing .whl (both folders listed in .git/info/exclude, carried by the device tool):
#   .venv/bin/python -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 [other manylinux tags] -d .whl \
#     <every distribution of `fairengine`'s requirement closure that the machine's image lacks
#      or holds in an incompatible version: Prefect, MLflow(-skinny, -tracing), Great
#      Expectations, POT, highspy, pydantic, SQLAlchemy, alembic, uvicorn, ... pinned as in .venv>
# To fit the 64 MiB transfer: POT's wheel without ot/bsp/*.so (its import made optional in
# ot/__init__.py and ot/bsp/bsp_ot.py), MLflow's without mlflow/server/js/build, and asyncpg
# replaced by a wheel holding asyncpg/__init__.py and asyncpg/exceptions.py with the three
# exception classes Prefect's server names (QueryCanceledError, ConnectionDoesNotExistError,
# CannotConnectNowError) and a Connection class. Then: cp ../shared/data/adult/adult.*.gz
# .devdata/adult/, and run this script through the device tool with carry [".whl", ".devdata"].
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
