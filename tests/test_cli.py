"""The ``fairengine`` command line, run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env or dict(os.environ),
        timeout=timeout,
    )


def test_help_documents_every_option_and_imports_nothing_heavy() -> None:
    top = cli("--help")
    assert top.returncode == 0 and "demo" in top.stdout and "audit" in top.stdout
    audit = cli("audit", "--help")
    for opt in ("--config", "--tracking-uri", "--output-dir", "--no-mlflow", "--fail-on-disparity"):
        assert opt in audit.stdout
    compare = cli("compare", "--help")
    for opt in ("--config", "--baseline", "--candidate", "--delta", "--gate", "--no-mlflow"):
        assert opt in compare.stdout
    assert "compare" in top.stdout
    demo = cli("demo", "--help")
    for opt in ("--home", "--n-per-group", "--seed"):
        assert opt in demo.stdout
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, flows.cli; flows.cli._build_parser();"
            "heavy = ('prefect', 'mlflow', 'great_expectations', 'torch');"
            "print(sorted(m for m in heavy if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    r = cli("audit", "--config", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2
    assert "config file" in r.stderr and "does not exist" in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_config_key_is_a_clear_error_before_prefect_starts(tmp_path: Path) -> None:
    cfg = tmp_path / "audit.yaml"
    cfg.write_text("data: {path: x.csv}\nthreshhold: 0.5\n")
    r = cli("audit", "--config", str(cfg))
    assert r.returncode == 2
    assert "unknown config key 'threshhold'; did you mean 'threshold'" in r.stderr
    assert "Starting the audit flow" not in r.stderr


@pytest.mark.flow
def test_demo_end_to_end_with_default_local_store(tmp_path: Path) -> None:
    """`fairengine demo` trains, registers and audits a model; the report and the MLflow run
    land in the project-local default store ($FAIRENGINE_HOME/mlflow.db)."""
    from mlflow import MlflowClient

    home = tmp_path / "home"
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)  # exercise the default store
    env["FAIRENGINE_HOME"] = str(home)
    r = cli("demo", "--n-per-group", "1000", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "Verdict: FAIL" in out  # the unconstrained model hires men far more often
    report = Path(
        next(
            line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Report:")
        )
    )
    assert report.is_file() and report.stat().st_size > 5_000
    assert report.parent.parent == home / "reports"
    db = home / "mlflow.db"
    assert db.is_file()
    client = MlflowClient(tracking_uri=f"sqlite:///{db}", registry_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name("fairengine-audits")
    (run,) = client.search_runs([exp.experiment_id])
    assert {a.path for a in client.list_artifacts(run.info.run_id, "audit")} == {
        "audit/audit.json",
        "audit/report.html",
        "audit/findings.json",
    }
    assert Path(exp.artifact_location.removeprefix("file://")).is_relative_to(home)
    mv = client.get_model_version("fairengine-demo-hiring", "1")
    assert mv.tags["fairness.verdict"] == "fail"
    # the written audit.yaml re-runs the same audit
    assert (home / "demo" / "audit.yaml").is_file()
    again = cli("audit", "--config", str(home / "demo" / "audit.yaml"), "--no-mlflow", env=env)
    assert again.returncode == 0, again.stderr
    assert "Verdict: FAIL" in again.stdout and "MLflow run" not in again.stdout


def test_sample_size_command_prints_the_plan_and_rejects_bad_input() -> None:
    from fairengine.permutation import plan_sample_size

    args = ("--metric", "tpr", "--rate-a", "0.8", "--rate-b", "0.7")
    ok = cli("sample-size", *args, "--base-rate-a", "0.3", "--base-rate-b", "0.4")
    assert ok.returncode == 0, ok.stderr
    plan = plan_sample_size("tpr", 0.8, 0.7, base_rate_a=0.3, base_rate_b=0.4)
    assert f"{plan.n_total:,} rows" in ok.stdout
    bad = cli("sample-size", *args, "--base-rate-a", "1.5", "--base-rate-b", "0.4")
    assert bad.returncode == 2 and "base_rate_a" in bad.stderr


def test_the_outcome_lists_a_requested_method_that_failed(capsys) -> None:
    """A failed method is printed under the verdict even when the verdict is FAIL for other
    tests (a raw-feature pipeline makes FlipTest fail on non-numeric features)."""
    from types import SimpleNamespace

    from fairengine.audit_context import AuditMetadata
    from fairengine.results import MethodResult, Verdict
    from flows.cli import _print_outcome

    result = SimpleNamespace(
        verdict=Verdict("fail", "1 of 3 tests reject", ["gap: rejected"]),
        methods=[
            MethodResult("group_parity", "Group parity"),
            MethodResult(
                "fliptest", "FlipTest", status="failed", reason="features are not numeric"
            ),
        ],
        warnings=[],
        metadata=AuditMetadata(),
    )
    _print_outcome(SimpleNamespace(result=result, paths={"report": "r", "json": "j"}, mlflow=None))
    out = capsys.readouterr().out
    assert "Failed:      FlipTest: features are not numeric" in out
    assert "Group parity" not in out
