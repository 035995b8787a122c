"""flows/startup.py: Prefect's embedded server is started before the flow, explicitly, and the
flow uses that very server (no second one); with ``PREFECT_API_URL`` set nothing starts; a
server that does not answer in time is the clear OrchestrationUnavailableError; the warm-ups
import what the steps will import.

The server starts run in fresh processes (as a CLI call or a first ``fairengine.audit`` in a
notebook does): this test session may already run an embedded server of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.config import AuditConfig

REPO = Path(__file__).resolve().parents[1]


def scored_case(tmp: Path, cache: bool = False) -> dict:
    """A small audit with the scores in the data (group parity only)."""
    rng = np.random.default_rng(3)
    n = 600
    frame = pd.DataFrame({"sex": rng.choice(["f", "m"], n), "y": rng.integers(0, 2, n)})
    frame["score"] = np.clip(0.3 + 0.4 * frame["y"] + rng.normal(0, 0.15, n), 0, 1)
    frame.to_csv(tmp / "data.csv", index=False)
    return {
        "name": "startup-case",
        "data": {"path": str(tmp / "data.csv")},
        "columns": {"label": "y", "protected": ["sex"], "score": "score"},
        "methods": {
            "group_metrics": {"enabled": False},
            "permutation_tests": {"enabled": False},
            "intersectional": {"enabled": False},
        },
        "output": {"dir": str(tmp / "reports")},
        "cache": {"enabled": cache, "dir": str(tmp / "cache")},
        "mlflow": {"enabled": False},
    }


def fresh_env(tmp: Path, **extra: str) -> dict[str, str]:
    # earlier tests' mlflow.set_registry_uri leaves MLFLOW_REGISTRY_URI in this process
    env = {
        k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_REGISTRY_URI")
    }
    env.update(
        PREFECT_HOME=str(tmp / "prefect-home"),
        FAIRENGINE_HOME=str(tmp / "fe-home"),
        PYTHONPATH=str(REPO),
        **extra,
    )
    return env


def run_script(
    script: str, tmp: Path, env: dict[str, str], timeout: int = 300, cwd: Path = REPO
) -> dict:
    """Run ``script`` in a fresh interpreter; it prints one JSON line last."""
    path = tmp / "script.py"
    path.write_text(textwrap.dedent(script))
    done = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.flow
def test_the_server_started_before_the_flow_is_the_one_the_flow_uses(tmp_path: Path) -> None:
    """run_audit starts the embedded server on its own thread before the flow; the flow run is
    recorded by that server, and no other server process was launched. The cache already has
    keys (a likely re-run), so the steps' imports run during the start (a first audit starts
    FlipTest's worker processes instead and leaves the imports to the steps)."""
    config = scored_case(tmp_path, cache=True)
    (tmp_path / "cache" / "keys").mkdir(parents=True)
    script = f"""
        import json, threading
        import httpx, psutil
        import flows.audit as audit
        from flows import startup

        seen = {{}}
        prepare = audit.prepare_while_server_starts

        def spy(cfg, extra=(), **kwargs):
            out = prepare(cfg, extra, **kwargs)
            seen["outcome"] = out
            return out

        audit.prepare_while_server_starts = spy
        run = audit.run_audit({config!r})
        from prefect.server.api.server import SubprocessASGIServer

        server = SubprocessASGIServer()
        servers = [
            p.pid for p in psutil.Process().children(recursive=True)
            if "prefect.server.api.server:create_app" in " ".join(p.cmdline())
        ]
        runs = httpx.post(
            server.api_url + "/flow_runs/filter",
            json={{"flows": {{"name": {{"any_": ["fairness-audit"]}}}}}},
        ).json()
        out = seen["outcome"]
        env = psutil.Process(server.server_process.pid).environ()
        block_types = httpx.post(server.api_url + "/block_types/filter", json={{}}).json()
        print(json.dumps({{
            "skipped": {{k: env.get(k) for k in startup.SKIPPED_AT_START}},
            "block_types": len(block_types),
            "started": out.server_started, "pid": out.server_pid, "servers": servers,
            "server_pid": server.server_process.pid, "runs": [r["state_type"] for r in runs],
            "verdict": run.result.verdict.status, "waited": out.waited_seconds,
            "server_seconds": out.server_seconds, "warmed": out.warmed, "left": out.left,
            "failed": out.failed,
        }}))
    """
    got = run_script(script, tmp_path, fresh_env(tmp_path))
    assert got["started"] is True
    assert got["servers"] == [got["pid"]] == [got["server_pid"]]  # one server: the early one
    assert got["runs"] == ["COMPLETED"]  # the flow ran on it (its steps' results cached)
    # it started without registering the installed collections' block types (1.4-1.9 s)
    assert {k: str(v).lower() for k, v in got["skipped"].items()} == dict.fromkeys(
        (
            "PREFECT_SERVER_REGISTER_BLOCKS_ON_START",
            "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION",
        ),
        "false",
    )
    assert got["block_types"] == 0
    assert got["verdict"] in ("pass", "fail")
    assert got["failed"] == []
    # every import warm-up was either done during the start or left to its step
    assert set(got["warmed"]) | set(got["left"]) == {"report"}
    assert 0 <= got["waited"] <= got["server_seconds"]


def test_the_embedded_server_skips_block_registration_unless_the_user_set_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import prefect.settings as ps

    from flows import startup

    for name, older in startup.SKIPPED_AT_START.items():
        for n in (name, *older):
            monkeypatch.delenv(n, raising=False)
    assert startup.embedded_server_settings() == {
        ps.PREFECT_SERVER_REGISTER_BLOCKS_ON_START: False,
        ps.PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION: False,
    }
    monkeypatch.setenv("PREFECT_API_BLOCKS_REGISTER_ON_START", "true")  # the older name
    assert startup.embedded_server_settings() == {
        ps.PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION: False
    }


@pytest.mark.flow
def test_the_cli_starts_the_server_before_the_flow_modules_and_joins_it(tmp_path: Path) -> None:
    """`fairengine audit`: the CLI launches Prefect's embedded server process itself once the
    inputs passed their checks, before the flow's modules (the start overlaps their import and
    the steps' warm-ups), without importing Prefect's server module; the server has answered
    before the first step, the flow run is recorded on it, and it is stopped when the process
    ends."""
    config = scored_case(tmp_path)
    (tmp_path / "audit.yaml").write_text(json.dumps(config))
    script = f"""
        import json, os, sys
        import psutil
        from flows import startup

        order = []
        launch = startup.launch_embedded_server

        def spy():
            order.append(("launch", "flows.preflight" in sys.modules, "flows.audit" in sys.modules))
            return launch()

        startup.launch_embedded_server = spy
        from flows.cli import main

        code = main(["audit", "--config", {str(tmp_path / "audit.yaml")!r}])
        import httpx

        url = os.environ["PREFECT_API_URL"]
        runs = httpx.post(
            url + "/flow_runs/filter",
            json={{"flows": {{"name": {{"any_": ["fairness-audit"]}}}}}},
        ).json()
        process = startup._launched.server_process
        env = psutil.Process(process.pid).environ()
        servers = [
            p.pid for p in psutil.Process().children(recursive=True)
            if "prefect.server.api.server:create_app" in " ".join(p.cmdline())
        ]
        names = [*startup.SKIPPED_AT_START, "PREFECT__SERVER_EPHEMERAL", "PREFECT_UI_ENABLED"]
        names.append("PREFECT_API_URL")
        print(json.dumps({{
            "code": code, "order": order, "url": url, "pid": process.pid, "servers": servers,
            "launched_url": startup.launched_api_url(),
            "server_module": "prefect.server.api.server" in sys.modules,
            "runs": [r["state_type"] for r in runs],
            "env": {{k: env.get(k) and env[k].lower() for k in names}},
        }}))
    """
    env = fresh_env(tmp_path)
    path = tmp_path / "cli.py"
    path.write_text(textwrap.dedent(script))
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["code"] == 0
    assert got["order"] == [["launch", True, False]]  # after the input checks, before the flow
    assert got["server_module"] is False  # the CLI process never imported it
    assert got["servers"] == [got["pid"]]  # one server: the launched one
    assert got["launched_url"] == got["url"]
    assert got["runs"] == ["COMPLETED"]  # the flow ran on it
    assert got["env"] == {
        "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",
        "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT_UI_ENABLED": "0",
        "PREFECT_API_URL": None,  # it serves the API, it reports to none
    }
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("[fairengine] ")]
    started = next(i for i, ln in enumerate(lines) if "prefect_server: started" in ln)
    answered = next(i for i, ln in enumerate(lines) if "prefect_server: finished in" in ln)
    first_step = next(i for i, ln in enumerate(lines) if "load_data: started" in ln)
    assert started < answered < first_step, lines
    assert any("Prefect embedded mode" in ln for ln in lines), lines
    import psutil

    assert not psutil.pid_exists(got["pid"])  # stopped when the CLI's process ended


def test_with_an_api_url_nothing_starts_and_only_the_extra_warm_ups_run(
    tmp_path: Path,
) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows import startup

    cfg = AuditConfig.from_dict(scored_case(tmp_path))
    calls: list[str] = []
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        assert not startup.embedded_server_applies()
        assert startup.start_embedded_server() is None
        out = startup.prepare_while_server_starts(cfg, extra=[lambda: calls.append("pool")])
    assert calls == ["pool"]
    assert out.server_started is False and out.server_pid is None
    assert out.warmed == () and out.left == () and out.waited_seconds == 0.0


def test_a_warm_up_that_fails_is_recorded_and_does_not_stop_the_audit(tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows import startup

    def broken_pool() -> None:
        raise OSError("no worker could start")

    cfg = AuditConfig.from_dict(scored_case(tmp_path))
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        out = startup.prepare_while_server_starts(cfg, extra=[broken_pool, lambda: None])
    assert out.failed == ("broken_pool",)


def test_a_server_that_does_not_answer_in_time_is_orchestration_unavailable(
    tmp_path: Path,
) -> None:
    """A start-up timeout too short for any start: run_audit (the CLI's and the Python API's
    path) raises OrchestrationUnavailableError with the setting and the way out, before the
    flow (nothing audited)."""
    config = scored_case(tmp_path)
    script = f"""
        import json
        from fairengine.errors import OrchestrationUnavailableError
        from flows.audit import run_audit

        try:
            run_audit({config!r})
        except OrchestrationUnavailableError as exc:
            print(json.dumps({{"error": str(exc)}}))
        else:
            print(json.dumps({{"error": None}}))
    """
    env = fresh_env(tmp_path, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="0")
    got = run_script(script, tmp_path, env)
    assert got["error"] is not None
    assert "did not start within 0 s" in got["error"]
    assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" in got["error"]
    assert "fairengine server start" in got["error"]
    assert not (tmp_path / "reports").exists()


def test_great_expectations_is_warmed_only_when_validation_is_sure_to_run(
    tmp_path: Path,
) -> None:
    from flows.startup import import_warmups, validation_will_run

    off = AuditConfig.from_dict(scored_case(tmp_path, cache=False))
    first = AuditConfig.from_dict(scored_case(tmp_path, cache=True))
    assert validation_will_run(off) and validation_will_run(first)
    assert [w.name for w in import_warmups(first)] == ["report", "Great Expectations"]
    (tmp_path / "cache" / "keys").mkdir(parents=True)  # a cache with keys: may be a hit
    assert not validation_will_run(first)
    assert validation_will_run(off)  # cache off: always runs
    assert [w.name for w in import_warmups(first)] == ["report"]
    model_case = {**scored_case(tmp_path), "model": {"uri": "models:/m/1"}}
    model_case["columns"] = {"label": "y", "protected": ["sex"]}
    with_model = AuditConfig.from_dict(model_case)
    names = [w.name for w in import_warmups(with_model)]
    # not torch, though individual fairness is on: a re-run reads its result from the cache
    assert names == ["model loader", "report", "Great Expectations"]  # (cache off)


@pytest.mark.flow
def test_the_model_loader_warm_up_imports_what_loading_the_model_imports(
    tmp_path: Path,
) -> None:
    """For a registered scikit-learn model (by version and by alias), the modules read from its
    MLmodel are the flavour's loader and its serialization package, and loading the model does
    import each of them. The store is the one given: without MLFLOW_TRACKING_URI nothing is
    looked up in (or written to) MLflow's default store in the working directory."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = fresh_env(tmp_path, MLFLOW_TRACKING_URI=store)
    register = f"""
        import json, mlflow
        import numpy as np
        from sklearn.linear_model import LogisticRegression

        mlflow.set_tracking_uri({store!r})
        mlflow.set_registry_uri({store!r})
        exp = mlflow.create_experiment("m", artifact_location={(tmp_path / "art").as_uri()!r})
        x = np.arange(20.0).reshape(-1, 1)
        with mlflow.start_run(experiment_id=exp):
            mlflow.sklearn.log_model(
                LogisticRegression().fit(x, x[:, 0] > 9), name="model",
                registered_model_name="startup-model",
            )
        mlflow.MlflowClient().set_registered_model_alias("startup-model", "champion", "1")
        print(json.dumps({{}}))
    """
    run_script(register, tmp_path, env)
    load = f"""
        import json, sys
        from flows.startup import model_loader_modules

        modules = model_loader_modules("models:/startup-model/1", {store!r})
        by_alias = model_loader_modules("models:/startup-model@champion", {store!r})
        assert by_alias == modules, (by_alias, modules)
        before = [m for m in modules if m in sys.modules]
        import mlflow

        mlflow.set_tracking_uri({store!r})
        mlflow.pyfunc.load_model("models:/startup-model/1")
        print(json.dumps({{
            "modules": modules, "before": before,
            "after": [m for m in modules if m in sys.modules],
        }}))
    """
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    no_default = {k: v for k, v in env.items() if k != "MLFLOW_TRACKING_URI"}
    got = run_script(load, tmp_path, no_default, cwd=elsewhere)
    assert not (elsewhere / "mlflow.db").exists()  # MLflow's default store: not touched
    assert got["modules"][0] == "mlflow.sklearn"
    assert len(got["modules"]) == 2 and got["modules"][1] in ("skops.io", "cloudpickle")
    assert got["before"] == []  # reading the MLmodel did not import them already
    assert got["after"] == got["modules"]  # loading the model imports every one of them


def test_a_first_audit_starts_the_worker_processes_and_a_rerun_warms_the_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_audit: with no cache keys yet (the methods will compute) the server start overlaps
    the worker processes' start and no imports; with keys (a likely re-run from the cache) it
    overlaps the steps' imports and starts no workers. The workers start only for FlipTest
    with a model, importing what its refits and the decision step's batches need."""
    import flows.audit as audit
    import flows.method_steps as method_steps

    calls: list[tuple[int, bool]] = []

    def prepare(cfg, extra=(), *, warm_imports=True):
        for fn in extra:
            fn()
        calls.append((len(extra), warm_imports))

    class Flow:
        def with_options(self, **kwargs):
            return lambda **kw: "ran"

    warmed: list[tuple[str, ...]] = []
    monkeypatch.setattr(audit, "prepare_while_server_starts", prepare)
    monkeypatch.setattr(audit, "audit_flow", Flow())
    monkeypatch.setattr(method_steps.worker_processes, "warm_up", warmed.append)
    config = scored_case(tmp_path, cache=True)
    config["model"] = {"uri": "models:/m/1"}
    del config["columns"]["score"]  # the model scores the data
    config["methods"]["fliptest"] = {"enabled": True}
    assert audit.run_audit(config) == "ran"
    assert calls == [(1, False)]
    # no MLflow (see RawModelScores); the map's torch and the validation's POT, which
    # FlipTest imports on first use (else in each worker with its first pair)
    assert warmed == [
        (
            "fairengine.fliptest.resampler",
            "fairengine.transport.entropic",
            "fairengine.transport.entropic_batch",
            "fairengine.transport.validation",
        )
    ]
    (tmp_path / "cache" / "keys").mkdir(parents=True)
    assert audit.run_audit(config) == "ran"
    assert calls[-1] == (0, True) and len(warmed) == 1
    config["methods"]["fliptest"] = {"enabled": False}  # first audit again, no FlipTest
    config["cache"]["enabled"] = False
    assert audit.run_audit(config) == "ran"
    assert calls[-1] == (1, False) and len(warmed) == 1
