"""The CLI at the boundary: bad input of every kind -> exit code 2 and a one-line-first message,
before Prefect starts; MLflow unavailable -> 3 with the audit on disk; internal errors -> 4;
the exit-code contract (0 / 1 with --fail-on-disparity) on real audits; `fairengine log` is
idempotent.

Every case runs the real command in a subprocess.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
FLOW_STARTED = "Starting the audit flow"


def cli(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None, timeout: int = 300):
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def scored_frame(n: int = 400, seed: int = 0, gap: float = 0.0) -> pd.DataFrame:
    """Scores in the data: sex (2 groups), race (3 groups), a label and a probability."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n)
    race = rng.choice(["a", "b", "c"], n)
    y = rng.integers(0, 2, n)
    score = np.clip(0.35 + 0.3 * y + gap * (sex == "male") + rng.normal(0, 0.15, n), 0, 1)
    return pd.DataFrame({"sex": sex, "race": race, "y": y, "score": score})


def write_case(tmp: Path, config: str, frame: pd.DataFrame | None = None, **files: str) -> Path:
    if frame is not None:
        frame.to_csv(tmp / "data.csv", index=False)
    for name, text in files.items():
        (tmp / name.replace("__", ".")).write_text(text)
    cfg = tmp / "audit.yaml"
    cfg.write_text(config)
    return cfg


BASE = """\
data: {path: data.csv}
columns: {label: y, protected: [sex], score: score}
methods:
  permutation_tests: {n_permutations: 99}
  intersectional: {n_bootstrap: 100, n_posterior: 100}
mlflow: {enabled: false}
"""


def _zip_codes(n: int = 3000) -> pd.DataFrame:
    f = scored_frame(n)
    f["zip"] = [f"{z:05d}" for z in np.arange(n) % 300]
    return f


# (case id, config text, frame factory or None, extra files, expected first-line fragments)
BAD_INPUT = [
    (
        "two-typos",
        "data: {path: data.csv}\ncolumns: {lable: y, protected: [sex], scor: score}\n",
        scored_frame,
        {},
        ["2 problems in the audit config", "did you mean 'columns.label'"],
    ),
    (
        "missing-data-file",
        "data: {path: nothere.csv}\ncolumns: {label: y, protected: [sex], score: score}\n",
        None,
        {},
        ["nothere.csv", "does not exist"],
    ),
    (
        "missing-column",
        BASE.replace("protected: [sex]", "protected: [gender]"),
        scored_frame,
        {},
        ["gender"],
    ),
    (
        "non-binary-label",
        BASE.replace("label: y", "label: race"),
        scored_frame,
        {},
        ["label column 'race' must be binary"],
    ),
    (
        "score-out-of-range",
        BASE.replace("score: score}", "score: y2}"),
        lambda: scored_frame().assign(y2=lambda f: f["score"] * 3),
        {},
        ["outside [0, 1]"],
    ),
    (
        "no-scores",
        "data: {path: data.csv}\ncolumns: {label: y, protected: [sex]}\n",
        scored_frame,
        {},
        ["no scores to audit"],
    ),
    (
        "300-level-attribute",
        BASE.replace("protected: [sex]", "protected: [zip]"),
        _zip_codes,
        {},
        ["'zip' has 300 groups", "validation.max_groups"],
    ),
    (
        "bad-yaml",
        "data: {path: data.csv\ncolumns: [",
        scored_frame,
        {},
        ["is not valid YAML"],
    ),
    (
        "threshold-out-of-range",
        BASE + "threshold: 1.5\n",
        scored_frame,
        {},
        ["threshold must lie in [0, 1]"],
    ),
]


@pytest.mark.parametrize(
    ("case", "config", "make_frame", "files", "expected"),
    BAD_INPUT,
    ids=[c[0] for c in BAD_INPUT],
)
def test_bad_input_exits_2_with_the_message_first_and_before_prefect(
    tmp_path: Path, case: str, config: str, make_frame, files, expected
) -> None:
    cfg = write_case(tmp_path, config, make_frame() if make_frame else None, **files)
    r = cli("audit", "--config", str(cfg), env={"FAIRENGINE_HOME": str(tmp_path / "home")})
    assert r.returncode == 2, (case, r.returncode, r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("[fairengine]")]
    assert lines and lines[0].startswith("fairengine: error: "), r.stderr
    message = "\n".join(lines)
    for fragment in expected:
        assert fragment in message, (fragment, message)
    assert "Traceback" not in r.stderr
    assert FLOW_STARTED not in r.stderr  # refused before any Prefect engine/server started
    assert not (tmp_path / "home").exists()  # nothing written: no cache, report or store


def test_path_outside_is_read_but_never_echoed(tmp_path: Path) -> None:
    """A config pointing at a system file gets an error naming columns and counts, never a line
    of the file."""
    cfg = write_case(
        tmp_path,
        "data: {path: ../../../../../../../../etc/passwd, format: csv}\n"
        "columns: {label: y, protected: [sex], score: score}\n",
    )
    r = cli("audit", "--config", str(cfg))
    assert r.returncode == 2
    for line in Path("/etc/passwd").read_text().splitlines()[:20]:
        for field in {f for f in line.split(":") if len(f) > 3}:
            assert field not in r.stderr.replace("/etc/passwd", ""), field


def test_internal_error_exits_4_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    """A bug (here: the flow module replaced by one that raises) is exit 4, not 1 or 2."""
    cfg = write_case(tmp_path, BASE, scored_frame())
    boom = tmp_path / "boom"
    (boom / "flows").mkdir(parents=True)
    (boom / "sitecustomize.py").write_text(
        "import flows.audit\n"
        "def _boom(**kw):\n    raise RuntimeError('simulated bug')\n"
        "flows.audit.run_audit = _boom\n"
    )
    env = {"PYTHONPATH": f"{boom}{os.pathsep}{REPO}"}
    r = cli("audit", "--config", str(cfg), env=env)
    assert r.returncode == 4, r.stderr[-2000:]
    assert "internal error: RuntimeError: simulated bug" in r.stderr
    assert "Traceback" not in r.stderr
    d = cli("audit", "--config", str(cfg), "--debug", env=env)
    assert d.returncode == 4 and "Traceback" in d.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_mlflow_down_exits_3_quickly_with_the_audit_on_disk_and_log_is_idempotent(
    tmp_path: Path,
) -> None:
    """A stopped MLflow server: the audit runs, is saved, exit 3 with the `fairengine log`
    command printed; that command, once MLflow is there, logs one run however often it runs."""
    dead = f"http://127.0.0.1:{_free_port()}"
    cfg = write_case(
        tmp_path,
        BASE.replace("mlflow: {enabled: false}", f"mlflow: {{tracking_uri: '{dead}'}}")
        + "output: {dir: out}\n",
        scored_frame(),
    )
    r = cli("audit", "--config", str(cfg), env={"FAIRENGINE_HOME": str(tmp_path / "home")})
    assert r.returncode == 3, r.stderr[-3000:]
    assert "MLflow unavailable" in r.stderr and "Traceback" not in r.stderr
    result = next((tmp_path / "out").glob("*/audit.json"))
    assert (result.parent / "report.html").is_file()
    assert f"fairengine log --result {result}" in r.stderr

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for _ in range(2):
        logged = cli(
            "log", "--result", str(result), "--tracking-uri", store,
            cwd=elsewhere, env={"PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert logged.returncode == 0, logged.stderr[-2000:]
    assert "already logged" in logged.stdout
    assert not list(elsewhere.iterdir())  # artifacts beside the store, not in ./mlruns

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name("fairengine-audits")
    runs = client.search_runs([exp.experiment_id])
    audit_id = json.loads(result.read_text())["audit_id"]
    assert [run.data.tags["fairness.audit_id"] for run in runs] == [audit_id]

    down = cli("log", "--result", str(result), "--tracking-uri", dead)
    assert down.returncode == 3 and "nothing logged" in down.stderr


def test_model_in_a_stopped_registry_exits_3_before_prefect(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
    cfg = write_case(
        tmp_path,
        "data: {path: data.csv}\ncolumns: {label: y, protected: [sex]}\n"
        f"model: {{uri: 'models:/credit/1'}}\nmlflow: {{tracking_uri: '{dead}'}}\n",
        scored_frame().drop(columns="score"),
    )
    r = cli("audit", "--config", str(cfg))
    assert r.returncode == 3, r.stderr[-2000:]
    assert "models:/credit/1" in r.stderr and FLOW_STARTED not in r.stderr


def test_exit_codes_of_real_audits_and_progress_lines(tmp_path: Path) -> None:
    """0 for a FAIL verdict without the flag, 1 with it; progress names every step; --quiet
    prints none."""
    cfg = write_case(tmp_path, BASE + "output: {dir: out}\n", scored_frame(3000, gap=0.2))
    env = {"FAIRENGINE_HOME": str(tmp_path / "home")}
    plain = cli("audit", "--config", str(cfg), env=env)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "Verdict: FAIL" in plain.stdout
    for step in ("load_data", "validate_data", "group_parity", "permutation_tests"):
        assert f"[fairengine] {step}: started" in plain.stderr, step
        assert any(
            ln.startswith(f"[fairengine] {step}: finished in ") for ln in plain.stderr.splitlines()
        ), step
    gated = cli("audit", "--config", str(cfg), "--fail-on-disparity", "--quiet", env=env)
    assert gated.returncode == 1, gated.stderr[-3000:]
    assert "[fairengine]" not in gated.stderr


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_signal_stops_an_audit_within_5_s_keeping_the_cache_and_no_mlflow_run(
    tmp_path: Path, sig: str
) -> None:
    """SIGTERM/SIGINT during a long permutation step: the process and its children (Prefect's
    embedded server) are gone within 5 s, exit 128 + signal; the methods that had finished are
    in the cache; the MLflow store holds no run."""
    import signal
    import threading
    import time

    import psutil

    slow = BASE.replace("n_permutations: 99", "n_permutations: 2000000").replace(
        "mlflow: {enabled: false}", f"mlflow: {{tracking_uri: 'sqlite:///{tmp_path}/m.db'}}"
    )
    cfg = write_case(tmp_path, slow + "cache: {dir: cache}\n", scored_frame(4000))
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "audit", "--config", str(cfg)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "FAIRENGINE_HOME": str(tmp_path / "home")},
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "group_parity: finished" in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(180), "".join(lines)
        time.sleep(1.0)  # the permutation step is running now
        children = psutil.Process(proc.pid).children(recursive=True)
        start = time.perf_counter()
        proc.send_signal(getattr(signal, sig))
        code = proc.wait(timeout=30)
        stopped = time.perf_counter() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(5)
    assert code == 128 + getattr(signal, sig), "".join(lines)
    assert stopped < 5.0, stopped
    assert f"{sig} received: stopping" in "".join(lines)
    time.sleep(0.5)
    assert not [c.pid for c in children if c.is_running() and c.status() != "zombie"]
    stored = list((tmp_path / "cache" / "results").glob("*"))
    assert stored, "the finished methods' results are not in the cache"

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/m.db")
    exp = client.get_experiment_by_name("fairengine-audits")
    assert exp is None or not client.search_runs([exp.experiment_id], run_view_type=3)


TEXT_LABEL_MODEL = """
import mlflow
import numpy as np


class TextLabels(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input, params=None):
        return np.where(model_input["x"] > 0, "yes", "no")


mlflow.models.set_model(TextLabels())
"""


def test_model_returning_text_labels_exits_2_naming_the_values(tmp_path: Path) -> None:
    """Before: a model serving 'yes'/'no' ended in a numpy ValueError and exit 1 (the FAIL
    code). Now: exit 2, the message names the values, no traceback."""
    import mlflow

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = tmp_path / "text_labels.py"
    code.write_text(TEXT_LABEL_MODEL)
    client = mlflow.MlflowClient(store, store)
    exp = client.create_experiment("models", artifact_location=(tmp_path / "art").as_uri())
    session_store = os.environ["MLFLOW_TRACKING_URI"]  # set_tracking_uri also sets the env var
    mlflow.set_tracking_uri(store)
    try:
        with mlflow.start_run(experiment_id=exp):
            info = mlflow.pyfunc.log_model(
                name="model", python_model=str(code), pip_requirements=["mlflow"]
            )
    finally:
        mlflow.set_tracking_uri(session_store)
        os.environ["MLFLOW_TRACKING_URI"] = session_store
    frame = scored_frame().drop(columns="score").assign(x=np.linspace(-1, 1, 400))
    cfg = write_case(
        tmp_path,
        "data: {path: data.csv}\ncolumns: {label: y, protected: [sex], features: [x]}\n"
        f"model: {{uri: '{info.model_uri}'}}\nmlflow: {{tracking_uri: '{store}'}}\n",
        frame,
    )
    r = cli("audit", "--config", str(cfg), env={"FAIRENGINE_HOME": str(tmp_path / "home")})
    assert r.returncode == 2, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("[fairengine]")]
    assert lines[0].startswith("fairengine: error: ")
    assert "'yes'" in r.stderr and "'no'" in r.stderr
    assert "Traceback" not in r.stderr
    assert "Task run failed" not in r.stderr  # the error once, not Prefect's three copies
    assert r.stderr.count("returned text labels") == 1


def test_an_embedded_prefect_server_that_does_not_start_exits_5_with_what_to_do(
    tmp_path: Path,
) -> None:
    """Prefect's embedded server not answering within its start-up timeout (an overloaded
    machine; here a timeout too short for any start) is a one-paragraph error naming the
    setting and the way out, exit 5, no traceback, nothing audited."""
    cfg = write_case(tmp_path, BASE, scored_frame())
    env = {
        "PREFECT_HOME": str(tmp_path / "fresh-prefect-home"),
        "FAIRENGINE_HOME": str(tmp_path / "fe-home"),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "0",
    }
    env.pop("PREFECT_API_URL", None)
    r = cli("audit", "--config", str(cfg), env=env)
    assert r.returncode == 5, r.stderr[-2000:]
    assert "Prefect unavailable: Prefect's embedded server did not start within 0 s" in r.stderr
    assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" in r.stderr
    assert "fairengine server start" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "fe-home" / "reports").exists()


def test_a_data_warning_is_printed_by_the_cli_not_echoed_by_prefects_console(
    tmp_path: Path,
) -> None:
    """A warning about the data (here a CSV separated by ', ') is printed by the CLI after its
    input checks and with the outcome, once each; Prefect's console no longer repeats the
    flow run's copy of it (a timestamped `| WARNING | Task run 'load-data-...'` line). With
    --debug, Prefect's output is left whole, without a link to a UI the embedded server does
    not serve."""
    frame = scored_frame(600)
    (tmp_path / "data.csv").write_text(frame.to_csv(index=False).replace(",", ", "))
    cfg = write_case(tmp_path, BASE)
    env = {"FAIRENGINE_HOME": str(tmp_path / "home")}
    plain = cli("audit", "--config", str(cfg), env=env)
    assert plain.returncode == 0, plain.stderr[-3000:]
    said = [ln for ln in plain.stderr.splitlines() if "and a space" in ln]
    assert len(said) == 1 and said[0].startswith("[fairengine] warning: "), plain.stderr
    assert sum("and a space" in ln for ln in plain.stdout.splitlines()) == 1, plain.stdout
    assert "| WARNING |" not in plain.stderr, plain.stderr
    debug = cli("audit", "--config", str(cfg), "--debug", env=env)
    assert debug.returncode == 0, debug.stderr[-3000:]
    echoed = [ln for ln in debug.stderr.splitlines() if "| WARNING |" in ln and "Data: " in ln]
    assert echoed and "and a space" in echoed[0], debug.stderr[-3000:]
    # the CLI's embedded server serves no UI: no "View at" link to one
    assert "View at" not in debug.stderr, debug.stderr[-3000:]
