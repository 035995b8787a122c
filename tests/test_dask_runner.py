"""Scale-out on Dask: the audit on prefect-dask's ``DaskTaskRunner`` (a local cluster of worker
processes) against a real ``prefect server`` gives the same result as the default thread pool.

Both audits run as the real CLI (``fairengine audit``) in subprocesses pointed at the server, with
the cache off so the Dask run really computes every method on the workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from deployments_support import clean_env, healthy, start_prefect_server, stop_all, wait_until

pytestmark = pytest.mark.flow
DASK_LOG = "DASK_LOGGING__DISTRIBUTED"
"""Dask's log level, which the CLI sets (without --debug) in its own environment: a test that
called the CLI in this process left it in ``os.environ``, and the audits here must not
inherit it (their --debug runs read the scheduler's log)."""


def comparable(result: dict) -> dict:
    """What must not depend on the runner: every method's status and findings, the verdict."""
    return {
        "verdict": result["verdict"],
        "methods": [
            {"method": m["method"], "status": m["status"], "findings": m["findings"]}
            for m in result["methods"]
        ],
    }


def test_dask_runner_gives_the_same_audit_as_the_thread_pool(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n = 3000
    frame = pd.DataFrame({"sex": rng.choice(["f", "m"], n), "race": rng.choice(["a", "b"], n)})
    frame["y"] = rng.binomial(1, 0.4, n)
    frame["score"] = np.clip(
        rng.normal(0.3 + 0.3 * frame["y"] + 0.05 * (frame["sex"] == "m"), 0.2), 0, 1
    )
    frame.to_csv(tmp_path / "scored.csv", index=False)
    logs = tmp_path / "logs"
    logs.mkdir()
    server, api = start_prefect_server(tmp_path, logs)
    procs = [server]
    try:
        wait_until(lambda: healthy(f"{api}/health"), 120, "the Prefect server", (server,))
        results = {}
        for kind in ("threads", "dask"):
            config = {
                "data": {"path": "scored.csv"},
                "columns": {"label": "y", "protected": ["sex", "race"], "score": "score"},
                "methods": {"permutation_tests": {"n_permutations": 499}},
                "output": {"dir": str(tmp_path / kind)},
                "mlflow": {"enabled": False},
                "cache": {"enabled": False},
                "runner": {"kind": kind, "dask_workers": 2},
            }
            path = tmp_path / f"{kind}.yaml"
            path.write_text(yaml.safe_dump(config))
            env = clean_env(
                PREFECT_API_URL=api,
                PREFECT_HOME=str(tmp_path / f"home-{kind}"),
                FAIRENGINE_HOME=str(tmp_path / f"fe-{kind}"),
            )
            env.pop(DASK_LOG, None)  # an in-process CLI call of another test may have set it
            # --debug for the Dask run: its scheduler's log (quiet otherwise) shows that the
            # run really went through Dask
            debug = ["--debug"] if kind == "dask" else []
            done = subprocess.run(
                [sys.executable, "-m", "flows.cli", "audit", "--config", str(path), *debug],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=600,
            )
            assert done.returncode == 0, done.stderr[-4000:]
            (saved,) = (tmp_path / kind).rglob("audit.json")
            results[kind] = json.loads(saved.read_text())
            if kind == "dask":  # the run really went through Dask
                assert "Receive client connection: PrefectDaskClient" in done.stderr
                quiet = subprocess.run(
                    [sys.executable, "-m", "flows.cli", "audit", "--config", str(path)],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=tmp_path,
                    timeout=600,
                )
                assert quiet.returncode == 0, quiet.stderr[-4000:]
                # without --debug, none of the scheduler's and nannies' INFO lines
                assert "distributed." not in quiet.stderr, quiet.stderr[-3000:]
        assert comparable(results["dask"]) == comparable(results["threads"])
        assert {m["method"] for m in results["dask"]["methods"] if m["status"] == "ok"} >= {
            "group_parity",
            "permutation_tests",
        }
    finally:
        leftovers = stop_all(procs)
        assert not any(leftovers.values()), leftovers


def test_the_cli_runs_dask_on_its_own_embedded_server(tmp_path: Path) -> None:
    """Without any Prefect server, `fairengine audit` with `runner: dask` runs: the CLI's
    embedded server process is in PREFECT_API_URL before the runner is made, so the Dask
    workers report to it (``fairengine.audit`` in Python refuses instead: in Prefect's own
    embedded mode each worker would start a server of its own)."""
    rng = np.random.default_rng(7)
    n = 800
    frame = pd.DataFrame({"sex": rng.choice(["f", "m"], n), "y": rng.binomial(1, 0.4, n)})
    frame["score"] = np.clip(rng.normal(0.3 + 0.3 * frame["y"], 0.2), 0, 1)
    frame.to_csv(tmp_path / "scored.csv", index=False)
    config = {
        "data": {"path": "scored.csv"},
        "columns": {"label": "y", "protected": ["sex"], "score": "score"},
        "methods": {"permutation_tests": {"n_permutations": 199}},
        "output": {"dir": str(tmp_path / "out")},
        "mlflow": {"enabled": False},
        "cache": {"enabled": False},
        "runner": {"kind": "dask", "dask_workers": 2},
    }
    path = tmp_path / "dask.yaml"
    path.write_text(yaml.safe_dump(config))
    env = clean_env(
        PREFECT_HOME=str(tmp_path / "prefect-home"), FAIRENGINE_HOME=str(tmp_path / "fe")
    )
    env.pop(DASK_LOG, None)  # an in-process CLI call of another test may have set it
    assert "PREFECT_API_URL" not in env
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", "audit", "--config", str(path), "--debug"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Receive client connection: PrefectDaskClient" in done.stderr  # through Dask
    (saved,) = (tmp_path / "out").rglob("audit.json")
    result = json.loads(saved.read_text())
    assert {m["method"] for m in result["methods"] if m["status"] == "ok"} >= {
        "group_parity",
        "permutation_tests",
    }
