"""Start-up of a CLI audit: what ``fairengine audit`` spends before its first method starts,
with Prefect's embedded server (no server running) and with ``fairengine server`` running.

Issue 23: "Each CLI call pays Prefect's embedded server start"; target: a warm re-run from the
cache under 10 s end to end, start-up included. Every audit here is a fresh process, as a CLI
call is: the demo's audit (``fairengine demo``'s data, registered LogisticRegression and
``audit.yaml``: 5,000 rows, FlipTest, individual fairness and mitigation on) with
``--no-mlflow --quiet``, every method result from the cache (each code version fills its own
cache in one unmeasured warm-up run first). Three modes, interleaved run by run so that the
machine's load falls on them alike (the order rotates from run to run):

* ``before``: the code of ``--baseline-rev`` (the commit before the early server start of
  :mod:`flows.startup`), no server (the flow's client starts Prefect's embedded server);
* ``embedded``: this checkout, no server running (the server starts before the flow while the
  flow's and the steps' modules are imported);
* ``server``: this checkout while ``fairengine server start`` runs (started once, timed).

``--cold-runs N`` adds N cold runs of ``before`` and ``embedded`` (interleaved): nothing cached
(``--no-cache``), a fresh Prefect home each (the embedded server migrates a new database), the
demo's methods without the model refits (FlipTest, individual fairness, mitigation, subgroup
scan), so that every step, Great Expectations and the report included, runs.

Each audit process runs under a wrapper (this file with ``--child``) that timestamps, without
importing anything the CLI would not: the end of the config and data checks, the import of the
flow modules, Prefect's embedded-server start (import of its server module in the CLI process
plus the wait for its health check, and the CPU time of its process until then), the early
start's outcome (:func:`flows.startup.prepare_while_server_starts`: what was imported during the
start, how long the audit's thread still blocked), the first flow step, the first method, the
decision step, the return of the flow, and the import of MLflow. The parent measures the process
from launch to exit and its CPU time (with the server's). Medians over ``--runs`` runs per mode.

Usage::

    .venv/bin/python benchmarks/startup_time.py            # 3 runs per mode
    .venv/bin/python benchmarks/startup_time.py --runs 5 --cold-runs 3

Writes ``benchmarks/results/startup.md`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BASELINE_REV = "9cfddb4"
"""The commit before the early server start (:mod:`flows.startup`): the flow's client starts
Prefect's embedded server and waits for it. (e34f99c, before the first start-up work, also
tore the interpreter's modules down at exit.)"""
COLD_OFF = ("fliptest", "individual_fairness", "mitigation", "subgroup_scan")
"""Methods off in the cold runs (``--cold-runs``), which recompute everything in each run."""
METHODS = (
    "group_parity",
    "group_metrics",
    "permutation_tests",
    "intersectional",
    "fliptest",
    "individual_fairness",
    "mitigation",
)


# --------------------------------------------------------------------------- child: one audit
class _ImportClock(importlib.abc.MetaPathFinder):
    """Calls ``before(name)`` / ``after(module)`` around the execution of chosen modules."""

    def __init__(self, hooks: dict[str, tuple[Any, Any]]) -> None:
        self.hooks = hooks

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.hooks:
            return None
        before, after = self.hooks.pop(name)
        spec = importlib.util.find_spec(name)  # the ordinary finders (this one has its hook popped)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            before()
            run(module)
            after(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def child(marks_path: Path, cli_args: list[str]) -> None:
    """Run ``fairengine <cli_args>`` in this process as the console script does, writing the
    wall-clock time (``time.time()``) of each phase boundary to ``marks_path``."""
    marks: dict[str, Any] = {"wrapper_start": time.time()}

    def mark(key: str) -> None:
        marks.setdefault(key, time.time())

    def save() -> None:
        marks_path.write_text(json.dumps(marks))

    def after_preflight_module(module: Any) -> None:
        run = module.preflight

        def preflight(*args: Any, **kwargs: Any) -> Any:
            out = run(*args, **kwargs)
            mark("checks_done")
            return out

        module.preflight = preflight

    def after_flow_module(module: Any) -> None:
        mark("flow_modules_imported")
        run = module.run_audit

        def run_audit(*args: Any, **kwargs: Any) -> Any:
            out = run(*args, **kwargs)
            mark("flow_returned")
            save()
            return out

        module.run_audit = run_audit

    def server_answered(process: Any) -> None:
        mark("server_healthy")
        try:  # CPU seconds the server process used until it answered
            import psutil

            cpu = psutil.Process(process.pid).cpu_times()
            marks["server_cpu"] = cpu.user + cpu.system
        except Exception:  # psutil missing or the process gone: not measured
            pass

    def after_server_module(module: Any) -> None:
        mark("server_module_imported")
        start = module.SubprocessASGIServer.start

        def timed_start(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(self, "running", False):
                return start(self, *args, **kwargs)
            marks.setdefault("server_start_begin", time.time())
            out = start(self, *args, **kwargs)
            server_answered(self.server_process)
            return out

        module.SubprocessASGIServer.start = timed_start

    def after_process_module(module: Any) -> None:
        """The CLI's own launch of the server process (no server module imported)."""
        cls = module.EmbeddedServerProcess
        launch, wait = cls.launch, cls.wait

        def timed_launch(self: Any) -> None:
            marks.setdefault("server_start_begin", time.time())
            launch(self)

        def timed_wait(self: Any, *args: Any, **kwargs: Any) -> None:
            wait(self, *args, **kwargs)
            server_answered(self.server_process)

        cls.launch, cls.wait = timed_launch, timed_wait

    def after_startup_module(module: Any) -> None:
        run = module.prepare_while_server_starts

        def prepare(*args: Any, **kwargs: Any) -> Any:
            mark("prepare_begin")
            out = run(*args, **kwargs)
            mark("prepare_end")
            marks["prepare_waited"] = out.waited_seconds
            marks["prepare_warmed"] = list(out.warmed)
            marks["prepare_left"] = list(out.left)
            return out

        module.prepare_while_server_starts = prepare

    sys.meta_path.insert(
        0,
        _ImportClock(
            {
                "flows.preflight": (lambda: None, after_preflight_module),
                "flows.startup": (lambda: None, after_startup_module),
                "flows.embedded_server_process": (lambda: None, after_process_module),
                "flows.audit": (lambda: mark("flow_modules_import_begin"), after_flow_module),
                "prefect.server.api.server": (
                    lambda: mark("server_module_import_begin"),
                    after_server_module,
                ),
                "mlflow": (lambda: mark("mlflow_import_begin"), lambda m: mark("mlflow_imported")),
            }
        ),
    )
    from fairengine import progress

    report = progress.report

    def on_progress(step: str, message: str, *args: Any, **kwargs: Any) -> None:
        if message == "started":
            mark(f"{step}_started")
            if step in METHODS:
                mark("first_method_started")
        elif message.startswith("finished"):
            mark(f"{step}_finished")
            if "cached" in message:
                mark(f"{step}_cached")
        report(step, message, *args, **kwargs)

    progress.report = on_progress
    from flows.cli import main

    sys.argv = ["fairengine", *cli_args]
    code = main()  # no argv: the whole process, as the console script runs it
    mark("main_returned")
    save()
    raise SystemExit(code)


# --------------------------------------------------------------------------- parent
PHASES: tuple[tuple[str, str], ...] = (
    ("python", "interpreter start (launch to the CLI's first line)"),
    ("checks", "imports (pandas, scipy, Prefect client, config) and the config and data checks"),
    (
        "startup",
        "checks done until the first flow step: flow modules' import, embedded server "
        "(its module's import, its start), warm-up imports, flow run start",
    ),
    ("steps", "data, model (MLflow import, load), scores, validation (cached)"),
    ("before_first", "**before the first method starts** (launch to the first method)"),
    ("methods", "methods (all from the cache)"),
    ("finish", "decision, report, local files, flow end"),
    ("exit", "exit: Prefect services drain, embedded server stop, interpreter teardown"),
    ("wall", "**wall, launch to exit**"),
)
DETAILS: tuple[tuple[str, str], ...] = (
    ("server_import", "embedded server: import of its module in the CLI process"),
    ("server_wait", "embedded server: its process launched until it answered"),
    ("server_cpu", "embedded server: CPU seconds of its process until it answered"),
    ("blocked", "the audit's thread blocked on the server start (nothing else to do)"),
    ("load_model", "of the steps: load_model (MLflow import, registry, skops/sklearn load)"),
    ("mlflow_import", "of load_model: `import mlflow` (0: imported during the server start)"),
    ("cpu", "CPU seconds, the audit process and its embedded server together"),
)


def phases(marks: dict[str, float], launched: float, ended: float) -> dict[str, float]:
    """Seconds per phase from one run's marks (wall-clock times) and its launch and exit."""
    m = marks
    first_step = m["load_data_started"]
    started = "server_healthy" in m
    if "prepare_waited" in m:  # the early start: the calling thread waited only at the join
        blocked = m["prepare_waited"]
    else:  # the flow's client started it and polled until it answered
        blocked = m["server_healthy"] - m["server_start_begin"] if started else 0.0
    mlflow_in_load = m.get("mlflow_import_begin", 0.0) >= m["load_model_started"]
    out = {
        "python": m["wrapper_start"] - launched,
        "checks": m["checks_done"] - m["wrapper_start"],
        "startup": first_step - m["checks_done"],
        "steps": m["first_method_started"] - first_step,
        "before_first": m["first_method_started"] - launched,
        "methods": m["decide_started"] - m["first_method_started"],
        "finish": m["flow_returned"] - m["decide_started"],
        "exit": ended - m["flow_returned"],
        "wall": ended - launched,
        "load_model": m["load_model_finished"] - m["load_model_started"],
        "mlflow_import": (m.get("mlflow_imported", 0.0) - m.get("mlflow_import_begin", 0.0))
        if mlflow_in_load
        else 0.0,
        "server_import": m.get("server_module_imported", 0.0)
        - m.get("server_module_import_begin", 0.0),
        "server_wait": m.get("server_healthy", 0.0) - m.get("server_start_begin", 0.0),
        "server_cpu": m.get("server_cpu", 0.0),
        "blocked": blocked,
        "validate_data": m["validate_data_finished"] - m["validate_data_started"],
        "render_report": m["render_report_finished"] - m["render_report_started"],
    }
    out = {k: round(v, 3) for k, v in out.items()}
    out["embedded_server_started"] = float(started)
    ran = [x for x in METHODS if f"{x}_started" in m]
    out["uncached_methods"] = float(sum(f"{x}_cached" not in m for x in ran))
    return out


def run_audit_process(
    src: Path, env: dict[str, str], config: Path, marks: Path, extra: tuple[str, ...] = ()
) -> dict[str, float]:
    """One audit as a fresh process under the wrapper; returns its phases."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(marks), "--"]
    cmd += ["audit", "--config", str(config), "--no-mlflow", "--quiet", *extra]
    marks.unlink(missing_ok=True)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched = time.time()
    done = subprocess.run(
        cmd,
        env={**env, "PYTHONPATH": str(src)},
        cwd=src,
        capture_output=True,
        text=True,
        timeout=900,
    )
    ended = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"audit failed ({done.returncode}):\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = phases(json.loads(marks.read_text()), launched, ended)
    # CPU seconds of the audit process and the children it waited for (the embedded server)
    out["cpu"] = round(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime, 3)
    return out


def base_env(root: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PREFECT_API_URL", "PREFECT_API_KEY", "MLFLOW_REGISTRY_URI", "PYTHONPATH")
    }
    env.update(
        {
            "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
            "DO_NOT_TRACK": "true",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "GX_ANALYTICS_ENABLED": "false",
            "MPLBACKEND": "Agg",
        }
    )
    return env


def prepare(root: Path, env: dict[str, str]) -> Path:
    """The demo's data, model and config (this checkout's ``prepare_demo``), with the cache
    and output folders fixed so that every mode shares them."""
    demo_home = root / "demo-home"
    script = (
        "from flows.demo import prepare_demo\n"
        "p = prepare_demo(progress=lambda s: None)\n"
        "print(p.config_path)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "FAIRENGINE_HOME": str(demo_home), "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    import yaml

    config_path = Path(done.stdout.strip().splitlines()[-1])
    config = yaml.safe_load(config_path.read_text())
    config["cache"] = {"dir": str(root / "cache")}
    config["output"] = {"dir": str(root / "reports")}
    bench = config_path.with_name("audit-startup.yaml")
    bench.write_text(yaml.safe_dump(config, sort_keys=False))
    cold = dict(config)  # the cold runs: the methods that need no model refits, cache off
    cold["methods"] = {
        **(config.get("methods") or {}),
        **{name: {"enabled": False} for name in COLD_OFF},
    }
    bench.with_name("audit-startup-cold.yaml").write_text(yaml.safe_dump(cold, sort_keys=False))
    return bench


def baseline_source(rev: str, root: Path) -> Path:
    """``git archive`` of ``rev`` into ``root/baseline``."""
    out = root / "baseline"
    out.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}"


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), sys.argv[4:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per mode (default 3)")
    ap.add_argument("--baseline-rev", default=BASELINE_REV, help="code of the 'before' mode")
    ap.add_argument("--out", type=Path, default=RESULTS / "startup.md")
    ap.add_argument(
        "--cold-runs",
        type=int,
        default=0,
        help="also this many cold runs per mode (before, embedded): --no-cache, a fresh "
        f"Prefect home each, the demo's methods without {', '.join(COLD_OFF)}",
    )
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="fairengine-startup-"))
    env = base_env(root)
    loads = [os.getloadavg()[0]]
    config = prepare(root, env)
    sources = {"before": baseline_source(args.baseline_rev, root), "now": REPO}
    envs = {
        "before": {
            **env,
            "FAIRENGINE_HOME": str(root / "home-embedded"),
            "PREFECT_HOME": str(root / "prefect-embedded"),
        },
        "embedded": {
            **env,
            "FAIRENGINE_HOME": str(root / "home-embedded"),
            "PREFECT_HOME": str(root / "prefect-embedded"),
        },
        "server": {
            **env,
            "FAIRENGINE_HOME": str(root / "home-server"),
            "PREFECT_HOME": str(root / "prefect-server"),
        },
    }
    marks = root / "marks.json"
    warm: dict[str, float] = {}
    for name, mode in (("before", "before"), ("now", "embedded")):
        t = time.perf_counter()
        run_audit_process(sources[name], envs[mode], config, marks)
        warm[name] = time.perf_counter() - t
        print(f"warm-up ({name} code, methods computed and cached): {warm[name]:.1f} s")

    server_env = {**envs["server"], "PYTHONPATH": str(REPO)}
    cli = [sys.executable, "-m", "flows.cli", "server"]
    t = time.perf_counter()
    subprocess.run([*cli, "start", "--port", "0", "--no-ui"], env=server_env, cwd=REPO, check=True)
    server_start = time.perf_counter() - t
    print(f"fairengine server start: {server_start:.1f} s")
    results: dict[str, list[dict[str, float]]] = {"before": [], "embedded": [], "server": []}
    warmups: dict[str, list[str]] = {mode: [] for mode in results}
    try:
        for i in range(args.runs):
            order = list(results)
            for mode in order[i % len(order) :] + order[: i % len(order)]:  # rotating
                src = sources["before" if mode == "before" else "now"]
                got = run_audit_process(src, envs[mode], config, marks)
                if got["embedded_server_started"] != (mode != "server"):
                    raise RuntimeError(f"{mode} run: embedded server started is wrong: {got}")
                if got["uncached_methods"]:
                    raise RuntimeError(f"{mode} run: a method was recomputed (code changed?)")
                results[mode].append(got)
                loads.append(os.getloadavg()[0])
                warmed = json.loads(marks.read_text()).get("prepare_warmed")
                if warmed is not None:
                    warmups[mode].append(", ".join(warmed) or "none")
                print(
                    f"run {i + 1} {mode}: wall {got['wall']:.1f} s, first method at "
                    f"{got['before_first']:.1f} s, CPU {got['cpu']:.1f} s, load "
                    f"{loads[-1]:.1f}, warmed during the start: {warmed}"
                )
    finally:
        subprocess.run([*cli, "stop"], env=server_env, cwd=REPO, check=True)
    cold: dict[str, list[dict[str, float]]] = {"before": [], "embedded": []}
    cold_warmed: list[str] = []
    cold_config = config.with_name("audit-startup-cold.yaml")
    for i in range(args.cold_runs):
        order = list(cold)
        for mode in order[i % 2 :] + order[: i % 2]:
            fresh = {
                **env,
                "FAIRENGINE_HOME": str(root / f"home-cold-{mode}-{i}"),
                "PREFECT_HOME": str(root / f"prefect-cold-{mode}-{i}"),
            }
            src = sources["before" if mode == "before" else "now"]
            got = run_audit_process(src, fresh, cold_config, marks, ("--no-cache",))
            cold[mode].append(got)
            loads.append(os.getloadavg()[0])
            warmed = json.loads(marks.read_text()).get("prepare_warmed")
            if warmed is not None:
                cold_warmed.append(", ".join(warmed) or "none")
            print(
                f"cold run {i + 1} {mode}: wall {got['wall']:.1f} s, first step at "
                f"{got['before_first'] - got['steps']:.1f} s, validate {got['validate_data']:.1f}"
                f" s, load_model {got['load_model']:.1f} s, render {got['render_report']:.1f} s, "
                f"load {loads[-1]:.1f}, warmed during the start: {warmed}"
            )

    rev = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.baseline_rev],
        capture_output=True,
        text=True,
    ).stdout.strip()
    modes = list(results)
    head = "| phase | " + " | ".join(modes) + " |"
    rows = [head, "|---|" + "---|" * len(modes)]
    for key, label in PHASES + DETAILS:
        cells = [fmt([r[key] for r in results[m]]) for m in modes]
        if key in ("before_first", "wall"):
            cells = [f"**{c}**" for c in cells]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    walls = {m: ", ".join(f"{r['wall']:.1f}" for r in results[m]) for m in modes}
    lines = [
        "# Start-up of a CLI audit: embedded Prefect server vs `fairengine server`",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        "- command: `.venv/bin/python benchmarks/startup_time.py"
        + (f" --runs {args.runs}" if args.runs != 3 else "")
        + (f" --cold-runs {args.cold_runs}" if args.cold_runs else "")
        + "`",
        f"- machine: {platform.system().lower()}, {os.cpu_count()} CPU cores, Python "
        f"{platform.python_version()}, shared with other jobs: 1-min load average "
        f"{min(loads):.1f}-{max(loads):.1f} during the runs (sampled after each run).",
        "- audit: the demo's (`fairengine demo`: 5,000 rows, `models:/fairengine-demo-hiring/1`, "
        "a LogisticRegression loaded from the MLflow registry; FlipTest, individual fairness and "
        "mitigation on) as `fairengine audit --config audit.yaml --no-mlflow --quiet`, each a "
        "fresh process, **every method result from the cache** (the warm re-run).",
        f"- modes, interleaved run by run (order rotating), {args.runs} runs each, medians in "
        "seconds: "
        f"`before` = commit {rev} (before the early start: the flow's Prefect client starts "
        "the embedded server and waits for it); `embedded` = this code, no server running "
        "(the server starts before the flow, the flow modules' import and the warm-up imports "
        "run while it starts: `flows/startup.py`); `server` = this code with `fairengine server "
        f"start` running (its start took {server_start:.1f} s once, with a fresh Prefect "
        "database).",
        f"- warm-up runs (not measured: methods computed and cached, first embedded-server start "
        f"on a fresh Prefect home): before {warm['before']:.1f} s, now {warm['now']:.1f} s.",
        "",
        *rows,
        "",
        "Wall per run: " + "; ".join(f"{m} {walls[m]}" for m in modes) + ".",
        "",
        "Warm-up imports done while the embedded server started (`embedded`, per run): "
        + "; ".join(warmups["embedded"] or ["none recorded"])
        + ".",
        "",
        "The phases come from timestamps taken inside each audit process (`--child` wrapper: "
        "import hooks and the progress events of the flow) and the parent's launch and exit "
        "times; each row is a median of its own, so the rows need not add up to the totals. "
        "CPU seconds: `getrusage` of the audit process and the children it waited for (its "
        "embedded server). With `before`, the audit's thread polls the server for its whole "
        "start; with `embedded` it imports the flow's modules and the steps' modules meanwhile "
        "and blocks only for what is left; `server` has neither the server-module import nor "
        "the start. On a machine whose cores are busy with other jobs the overlap gains "
        "little: the server and the audit then share the CPU time the audit had alone.",
        "",
    ]
    if args.cold_runs:
        cold_rows = [
            ("first_step", "launch to the flow's first step (`load_data`)"),
            ("startup", "of which: checks done until the first flow step"),
            ("blocked", "the audit's thread blocked on the server start"),
            ("server_wait", "embedded server: launched until it answered (fresh database)"),
            ("load_model", "load_model"),
            ("validate_data", "validate_data (Great Expectations)"),
            ("render_report", "render_report"),
            ("wall", "**wall, launch to exit**"),
            ("cpu", "CPU seconds, the audit process and its embedded server together"),
        ]
        for runs in cold.values():
            for r in runs:
                r["first_step"] = round(r["before_first"] - r["steps"], 3)
        lines += [
            f"## Cold runs ({args.cold_runs} per mode, interleaved)",
            "",
            "`fairengine audit --config audit-startup-cold.yaml --no-mlflow --quiet --no-cache`: "
            f"the demo's audit without {', '.join(COLD_OFF)}, nothing cached, a fresh Prefect "
            "home each run (the embedded server migrates a new database); medians in seconds.",
            "",
            "| phase | before | embedded |",
            "|---|---|---|",
            *(
                f"| {label} | " + " | ".join(fmt([r[key] for r in cold[m]]) for m in cold) + " |"
                for key, label in cold_rows
            ),
            "",
            "Wall per run: "
            + "; ".join(f"{m} " + ", ".join(f"{r['wall']:.1f}" for r in cold[m]) for m in cold)
            + ". Warm-up imports done during the start (`embedded`, per run): "
            + "; ".join(cold_warmed or ["none recorded"])
            + ".",
            "",
        ]
    args.out.write_text("\n".join(lines))
    print(args.out.read_text())
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
