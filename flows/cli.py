"""The ``fairengine`` command line.

Imports of Prefect, MLflow and Great Expectations (about 9 s together) happen only inside the
commands, so ``fairengine --help`` is instant. Offline defaults (telemetry off) and the Prefect
API an audit reports to (:mod:`flows.prefect_server`: ``PREFECT_API_URL``, a running
``fairengine server``, else Prefect's embedded server) are settled before any of them is
imported.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from flows.cli_console import (
    CONSOLE,
    ProgressPrinter,
    quiet_engine_tracebacks,
    quiet_library_output,
)
from flows.cli_signals import (
    AuditInterrupted,
    end_after_exit_hooks,
    hard_exit,
    in_worker_thread,
    install_signal_handlers,
)
from tasks.settings import apply_offline_defaults

if TYPE_CHECKING:
    from flows.prefect_server import PrefectApi

EPILOG = """\
environment:
  FAIRENGINE_HOME       folder for the default MLflow store, reports and demo files
                        (default ./fairengine-runs)
  MLFLOW_TRACKING_URI   MLflow store/server to use instead of $FAIRENGINE_HOME/mlflow.db
  PREFECT_API_URL       a Prefect server to report runs to (default: the server started by
                        `fairengine server start` if it runs, else Prefect's embedded one)

exit codes:
  0  the audit ran (verdict pass, incomplete, or fail without --fail-on-disparity)
  1  verdict FAIL with --fail-on-disparity
  2  bad input: configuration, data, or model (the message on stderr says what to change)
  3  MLflow unavailable: the audit's report.html and audit.json are on disk; record them
     later with `fairengine log --result <audit.json>` (the command is printed)
  4  internal error (a bug: please report it with the output of --debug)
  5  Prefect unavailable: its embedded server did not start in time (nothing was audited;
     the message names the timeout setting and `fairengine server start`)
  130/143  stopped by SIGINT/SIGTERM
"""

EXIT_FAIL, EXIT_INPUT, EXIT_MLFLOW, EXIT_INTERNAL, EXIT_PREFECT = 1, 2, 3, 4, 5
PDF_HELP = (
    "also print the report to report.pdf beside report.html (headless Chromium) and log it to "
    "the MLflow run as audit/report.pdf"
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairengine",
        description="Statistically sound fairness audits of classification models.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--quiet", "-q", action="store_true", help="no progress output (errors and results only)"
    )
    common.add_argument(
        "--debug",
        action="store_true",
        help="show framework logs and full tracebacks (for bug reports)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="train a small model on an embedded dataset, register it in the local MLflow "
        "registry and audit it",
        description="Train a logistic-regression hiring model on the Lipton et al. synthetic "
        "data (embedded, no download), register it in MLflow, write the audit data and an "
        "audit.yaml you can edit and re-run, and audit the model. Prints where the report and "
        "the MLflow run are.",
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    demo.add_argument(
        "--home",
        type=Path,
        default=None,
        help="folder for all demo outputs (default: $FAIRENGINE_HOME or ./fairengine-runs)",
    )
    demo.add_argument(
        "--n-per-group",
        type=int,
        default=5000,
        help="rows generated per gender (default 5000; half train, half audit)",
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--task",
        choices=("binary", "regression", "multiclass", "ranking"),
        default="binary",
        help="binary (default: the hiring model) or the proxy-shift example of a regression, "
        "multiclass or ranking model (a proxy feature that under-rates group B)",
    )
    demo.add_argument(
        "--rows",
        type=int,
        default=8000,
        help="rows generated for a --task regression/multiclass/ranking demo (default 8000; "
        "half train, half audit)",
    )
    demo.add_argument("--pdf", action="store_true", help=PDF_HELP)

    _add_compare_parser(sub, common)
    audit = sub.add_parser(
        "audit",
        help="run an audit described by a YAML config",
        description="Run the audit flow described by an audit YAML (data, column roles, model "
        "URI or a score column, methods and parameters; see README 'Configuration reference').",
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    audit.add_argument("--config", "-c", type=Path, required=True, help="the audit YAML file")
    audit.add_argument(
        "--tracking-uri",
        default=None,
        help="override mlflow.tracking_uri (e.g. http://127.0.0.1:5000)",
    )
    audit.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="override output.dir (local copies of audit.json and report.html)",
    )
    audit.add_argument(
        "--no-mlflow", action="store_true", help="do not log to MLflow (local outputs only)"
    )
    audit.add_argument(
        "--no-cache",
        action="store_true",
        help="recompute every method step instead of reusing cached results (cache.enabled)",
    )
    audit.add_argument(
        "--fail-on-disparity",
        action="store_true",
        help="exit with status 1 when the verdict is 'fail' (for CI gates)",
    )
    audit.add_argument("--pdf", action="store_true", help=PDF_HELP + " (report.pdf: true)")
    plan = sub.add_parser(
        "sample-size",
        help="rows an audit needs to detect a given difference in a metric between two groups",
        description="Sample-size planning for the studentized permutation test (normal "
        "approximation, DiCiccio et al. 2020 §5.1): the rows needed in total and per group to "
        "detect rate_a - rate_b at level alpha with the given power. For rates that condition "
        "on a label (tpr, fnr: positives; fpr, tnr: negatives; precision: predicted positives) "
        "give each group's base rate; for auc, the prevalence.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plan.add_argument(
        "--metric",
        required=True,
        help="tpr, fnr, fpr, tnr, precision, positive_rate, accuracy or auc",
    )
    plan.add_argument("--rate-a", type=float, required=True, help="the metric in group A")
    plan.add_argument("--rate-b", type=float, required=True, help="the metric in group B")
    plan.add_argument(
        "--base-rate-a",
        type=float,
        default=None,
        help="share of group A's rows the metric conditions on (e.g. P(y=1) for tpr)",
    )
    plan.add_argument("--base-rate-b", type=float, default=None, help="the same for group B")
    plan.add_argument(
        "--share-a", type=float, default=0.5, help="fraction of rows in group A (default 0.5)"
    )
    plan.add_argument("--alpha", type=float, default=0.05, help="significance level (0.05)")
    plan.add_argument("--power", type=float, default=0.8, help="desired power (0.8)")
    plan.add_argument(
        "--alternative",
        default="two-sided",
        choices=["two-sided", "greater", "less"],
        help="alternative hypothesis (default two-sided)",
    )

    server = sub.add_parser(
        "server",
        help="keep a local Prefect server running so that audits skip the embedded server's "
        "start (start, stop, status)",
        description="Start, stop or show a Prefect server on 127.0.0.1 (`prefect server start`, "
        "detached, its log in $FAIRENGINE_HOME/prefect-server.log). While it runs, audits with "
        "the same FAIRENGINE_HOME report to it instead of starting Prefect's embedded server, "
        "and its UI shows their runs. PREFECT_API_URL, when set, still wins. `status` exits "
        "with 0 when the server answers and 1 otherwise.",
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    server.add_argument("action", choices=["start", "stop", "status"], help="what to do")
    server.add_argument(
        "--port",
        type=int,
        default=4200,
        help="port on 127.0.0.1 for `start` (default 4200, Prefect's; 0 picks a free one)",
    )
    server.add_argument(
        "--no-ui", action="store_true", help="serve the API only, without Prefect's UI"
    )
    server.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds `start` waits for the server to answer (default 120)",
    )

    report = sub.add_parser(
        "report",
        help="print a finished audit's report to PDF (report.pdf beside report.html)",
        description="Print the report of an audit on disk to PDF with headless Chromium "
        "(--print-to-pdf), every collapsible section open, for reviewers who file documents. "
        "Give the audit's audit.json, its report.html or its folder; the PDF is written beside "
        "the report unless --output says where. Needs Chromium or Google Chrome (on PATH, or "
        "$FAIRENGINE_CHROMIUM). To attach the PDF to the audit's MLflow run, audit with --pdf "
        "or report.pdf: true.",
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument(
        "--result",
        "-r",
        type=Path,
        required=True,
        help="the audit's audit.json, report.html or output folder",
    )
    report.add_argument(
        "--pdf",
        action="store_true",
        required=True,
        help="write the PDF (the only form this command writes so far)",
    )
    report.add_argument(
        "--output", "-o", type=Path, default=None, help="the PDF file (default: beside the report)"
    )

    log = sub.add_parser(
        "log",
        help="log a finished audit's audit.json and report.html to MLflow (e.g. after the "
        "MLflow server was down)",
        description="Record an audit that ran but could not be logged: reads audit.json and "
        "the report.html (and report.pdf, if any) beside it, creates the MLflow run and tags "
        "the audited model version.",
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    log.add_argument("--result", "-r", type=Path, required=True, help="the audit.json to log")
    log.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow store or server (default: the audit's mlflow.tracking_uri, else "
        "$MLFLOW_TRACKING_URI, else $FAIRENGINE_HOME/mlflow.db)",
    )
    log.add_argument(
        "--experiment", default=None, help="experiment (default: the audit's mlflow.experiment)"
    )
    _add_history_parser(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fairengine`` command (exit codes: see :data:`EPILOG`).

    Without ``argv`` (the console script, ``python -m flows.cli``) it is the whole process: once
    the command is done and every exit hook has run, the process ends without the interpreter's
    module teardown (:func:`~flows.cli_signals.end_after_exit_hooks`).
    """
    outcome: dict[str, int] = {}
    if argv is None:
        end_after_exit_hooks(outcome)
    code = _main(argv)
    outcome["code"] = code
    return code


def _main(argv: list[str] | None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from importlib.metadata import version

        print(version("fairengine"))
        return 0
    if args.command is None:
        parser.print_help()
        return EXIT_INPUT
    debug = bool(getattr(args, "debug", False))
    CONSOLE.quiet = bool(getattr(args, "quiet", False))
    apply_offline_defaults()
    if not debug:  # our own progress lines replace Prefect's and MLflow's INFO chatter
        quiet_library_output()
    if args.command == "demo" and args.home is not None:
        os.environ["FAIRENGINE_HOME"] = str(args.home.expanduser().resolve())
    if args.command in ("audit", "demo", "compare"):  # before Prefect is imported (API: once)
        from flows.prefect_server import choose_prefect_api

        args.prefect_api = choose_prefect_api()
    install_signal_handlers()
    from fairengine import progress
    from fairengine.errors import (
        FairEngineError,
        MlflowUnavailableError,
        OrchestrationUnavailableError,
        ResultLoggingError,
    )

    if not CONSOLE.quiet:
        progress.set_listener(ProgressPrinter())
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "log":
            return _log(args)
        if args.command == "sample-size":
            return _sample_size(args)
        if args.command == "server":
            return _server(args)
        if args.command == "report":
            return _report(args)
        if args.command == "history":
            return _history(args)
        if args.command == "compare":
            return _compare(args)
        return _audit(args)
    except AuditInterrupted as exc:
        hard_exit(128 + exc.signum)
        return 128 + exc.signum  # not reached
    except (ResultLoggingError, MlflowUnavailableError) as exc:
        print(f"fairengine: error: MLflow unavailable: {exc}", file=sys.stderr)
        return EXIT_MLFLOW
    except OrchestrationUnavailableError as exc:
        print(f"fairengine: error: Prefect unavailable: {exc}", file=sys.stderr)
        return EXIT_PREFECT
    except FairEngineError as exc:
        print(f"fairengine: error: {exc}", file=sys.stderr)
        if debug:
            traceback.print_exc()
        return EXIT_INPUT
    except Exception as exc:
        print(
            f"fairengine: internal error: {type(exc).__name__}: {exc}\n"
            "This is a bug in FairEngine, not in your input; please report it with the output "
            "of the same command with --debug.",
            file=sys.stderr,
        )
        if debug:
            traceback.print_exc()
        return EXIT_INTERNAL
    finally:
        progress.set_listener(None)


def _audit(args: argparse.Namespace) -> int:
    from fairengine.config import AuditConfig, read_config_file

    cfg_path = args.config.expanduser()

    raw = read_config_file(cfg_path)
    if args.tracking_uri:
        raw.setdefault("mlflow", {})["tracking_uri"] = args.tracking_uri
    if args.output_dir:
        raw.setdefault("output", {})["dir"] = str(args.output_dir.resolve())
    if args.no_mlflow:
        raw.setdefault("mlflow", {})["enabled"] = False
    if args.no_cache:
        raw.setdefault("cache", {})["enabled"] = False
    if args.pdf:
        raw.setdefault("report", {})["pdf"] = True
    base_dir = cfg_path.parent.resolve()
    start = time.perf_counter()
    AuditConfig.from_dict(raw, base_dir=base_dir)  # config problems first, before heavy imports
    from flows.preflight import preflight

    checked = preflight(raw, base_dir)  # every input check, before Prefect starts
    CONSOLE.say(
        f"Checked the config and {checked.n_rows:,} rows of data in "
        f"{time.perf_counter() - start:.1f} s"
    )
    for warning in checked.warnings:
        CONSOLE.say(f"warning: {warning}")
    _launch_server(args.prefect_api)  # the inputs passed: it starts while the flow is imported
    store_down = checked.mlflow_down
    if store_down:
        assert checked.store is not None
        CONSOLE.say(
            f"warning: MLflow store {checked.store.uri} is not available "
            f"({checked.store.reason}); the audit runs and is saved locally"
        )
        raw.setdefault("mlflow", {})["enabled"] = False
    run = _run_flow(raw, str(base_dir), args.debug, args.prefect_api)
    _print_outcome(run)
    if store_down:
        assert checked.store is not None
        print(
            f"fairengine: error: MLflow unavailable: {checked.store.reason}. The audit is saved "
            f"at {run.paths['json']}; log it when MLflow is back with:\n"
            f"  fairengine log --result {run.paths['json']}"
            + (f" --tracking-uri {checked.store.uri}" if args.tracking_uri else ""),
            file=sys.stderr,
        )
        return EXIT_MLFLOW
    fail = args.fail_on_disparity and run.result.verdict.status == "fail"
    return EXIT_FAIL if fail else 0


def _sample_size(args: argparse.Namespace) -> int:
    from fairengine.permutation import plan_sample_size

    plan = plan_sample_size(
        args.metric,
        args.rate_a,
        args.rate_b,
        base_rate_a=args.base_rate_a,
        base_rate_b=args.base_rate_b,
        share_a=args.share_a,
        alpha=args.alpha,
        power=args.power,
        alternative=args.alternative,
    )
    print(plan.summary())
    return 0


def _log(args: argparse.Namespace) -> int:
    from fairengine.audit_file import load_audit
    from fairengine.errors import ConfigError, MlflowUnavailableError
    from tasks.mlflow_log import log_audit
    from tasks.mlflow_store import check_tracking_store
    from tasks.settings import default_tracking_uri

    path = args.result.expanduser()
    report = path.parent / "report.html"
    for needed in (path, report):
        if not needed.is_file():
            raise ConfigError(f"{str(needed)!r} does not exist; give the audit.json of an audit")
    try:
        result = load_audit(path)
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"{str(path)!r} is not a FairEngine audit result: {exc}") from None
    logged = result.config.get("mlflow")
    settings = logged if isinstance(logged, dict) else {}

    def setting(key: str) -> str | None:
        value = settings.get(key)
        return None if value is None else str(value)

    tracking_uri = args.tracking_uri or setting("tracking_uri") or default_tracking_uri()
    store = check_tracking_store(tracking_uri)
    if not store.reachable:
        raise MlflowUnavailableError(f"{store.reason}; nothing logged, try again later")
    pdf = path.parent / "report.pdf"
    info = log_audit(
        result,
        report.read_text(encoding="utf-8"),
        tracking_uri=tracking_uri,
        experiment=args.experiment or setting("experiment") or "fairengine-audits",
        tag_model_version=bool(settings.get("tag_model_version", True)),
        pdf=pdf if pdf.is_file() else None,
    )
    if info.get("already_logged"):
        print(
            f"Audit {result.audit_id} was already logged as MLflow run {info['run_id']} "
            f"({tracking_uri}); nothing new logged"
        )
    else:
        print(f"Logged audit {result.audit_id} to MLflow run {info['run_id']} ({tracking_uri})")
    return 0


def _report(args: argparse.Namespace) -> int:
    from fairengine.errors import ConfigError
    from tasks.report_pdf import find_browser, write_report_pdf

    given = args.result.expanduser()
    if given.is_dir():
        html = given / "report.html"
    elif given.suffix.lower() == ".json":
        html = given.parent / "report.html"
    else:
        html = given
    if not html.is_file():
        raise ConfigError(
            f"{str(html)!r} does not exist; give an audit's audit.json, report.html or folder"
        )
    browser = find_browser()
    CONSOLE.say(f"Printing {html} to PDF with {browser} ...")
    start = time.perf_counter()
    target = args.output.expanduser() if args.output else None
    pdf = write_report_pdf(html, target, browser=browser)
    print(f"PDF:         {pdf} ({time.perf_counter() - start:.1f} s)")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from flows.demo import prepare_demo, prepare_task_demo

    if args.pdf:  # before the demo trains anything
        from tasks.report_pdf import find_browser

        find_browser()
    CONSOLE.say("Preparing the demo: generating data, training and registering a model ...")
    _launch_server(args.prefect_api)  # meanwhile (nothing to check first); run_audit joins it
    if args.task == "binary":
        prepared = prepare_demo(n_per_group=args.n_per_group, seed=args.seed, progress=CONSOLE.say)
    else:
        prepared = prepare_task_demo(args.task, n=args.rows, seed=args.seed, progress=CONSOLE.say)
    if args.pdf:
        prepared.config.setdefault("report", {})["pdf"] = True
    run = _run_flow(prepared.config, str(prepared.config_path.parent), args.debug, args.prefect_api)
    _print_outcome(run)
    print(f"\nRe-run this audit with:  fairengine audit --config {prepared.config_path}")
    return 0


def _server(args: argparse.Namespace) -> int:
    from flows.prefect_server import server_status, start_server, stop_server

    if args.action == "start":
        if not server_status()[1]:
            CONSOLE.say("Starting the Prefect server (prefect server start) ...")
        started = time.perf_counter()
        record, already = start_server(args.port, ui=not args.no_ui, timeout=args.timeout)
        if already:
            print(f"A fairengine server is already running at {record.api_url} (pid {record.pid})")
        else:
            print(
                f"Prefect server running at {record.api_url} (pid {record.pid}), answered after "
                f"{time.perf_counter() - started:.1f} s; log: {record.log}"
            )
        if record.ui_url:
            print(f"UI:          {record.ui_url}")
        print(
            "Audits with this FAIRENGINE_HOME now report to it instead of starting Prefect's "
            "embedded server; stop it with `fairengine server stop`."
        )
        if os.environ.get("PREFECT_API_URL"):
            CONSOLE.say(
                f"warning: PREFECT_API_URL is set ({os.environ['PREFECT_API_URL']}); audits "
                "report there while it is set"
            )
        return 0
    if args.action == "stop":
        stopped = stop_server()
        if stopped is None:
            print("No fairengine server is recorded; nothing to stop")
        else:
            print(f"Stopped the Prefect server at {stopped.api_url} (pid {stopped.pid})")
        return 0
    recorded, healthy = server_status()
    if recorded is None:
        print("No fairengine server is running; audits use Prefect's default (embedded) server")
        return 1
    state = "running" if healthy else "recorded but not answering"
    print(f"Prefect server {state} at {recorded.api_url} (pid {recorded.pid}; log: {recorded.log})")
    return 0 if healthy else 1


def _run_flow(config: dict, base_dir: str, debug: bool, api: PrefectApi | None = None):
    start = time.perf_counter()
    if not debug:
        quiet_engine_tracebacks()
    if api is not None and api.note:
        CONSOLE.say(f"warning: {api.note}")
    CONSOLE.say(_flow_start_message(api))
    from flows.startup import start_embedded_server

    # the inputs passed their checks: Prefect's embedded server (if used, and not launched
    # already: _launch_server) starts now, while the flow's modules are imported; run_audit
    # joins it before the flow
    start_embedded_server()
    from flows.audit import run_audit

    run = in_worker_thread(lambda: run_audit(config=config, base_dir=base_dir))
    CONSOLE.say(f"Audit finished in {time.perf_counter() - start:.1f} s")
    return run


def _launch_server(api: PrefectApi | None) -> None:
    """Launch Prefect's embedded server process now when the audit will use it (no API chosen:
    ``PrefectApi`` mode ``default``), without importing Prefect's server module
    (:func:`flows.startup.launch_embedded_server`); the flow joins it."""
    if api is not None and api.mode == "default":
        from flows.startup import launch_embedded_server

        launch_embedded_server()


def _flow_start_message(api: PrefectApi | None) -> str:
    """Where the flow's runs go: a Prefect server, or the embedded one started now."""
    from prefect.settings import get_current_settings

    from flows.startup import launched_api_url

    url = get_current_settings().api.url
    if url and url != launched_api_url():
        mode = api.mode if api is not None else ""
        source = {"environment": "PREFECT_API_URL", "server": "fairengine server"}.get(
            mode, "Prefect profile"
        )
        return f"Starting the audit flow on the Prefect server at {url} ({source}) ..."
    return (
        "Starting the audit flow (Prefect embedded mode: its temporary server starts now and "
        "takes several seconds; `fairengine server start` keeps one running for later "
        "audits) ..."
    )


def _print_outcome(run) -> None:
    r = run.result
    print(f"\nVerdict: {r.verdict.status.upper()} - {r.verdict.summary}")
    for reason in r.verdict.reasons[:10]:
        print(f"  - {reason}")
    if len(r.verdict.reasons) > 10:
        print(f"  ... and {len(r.verdict.reasons) - 10} more (see the report)")
    for m in r.methods:  # a requested method that failed is news whatever the verdict
        if m.status == "failed":
            print(f"Failed:      {m.title}: {m.reason}")
    for warning in r.warnings:
        print(f"Warning:     {warning}")
    print(f"Report:      {run.paths['report']}")
    if run.paths.get("pdf"):
        print(f"PDF:         {run.paths['pdf']}")
    elif run.paths.get("pdf_error"):
        print(f"PDF:         not written: {run.paths['pdf_error']}")
    print(f"Result JSON: {run.paths['json']}")
    if run.mlflow:
        print(
            f"MLflow run:  {run.mlflow['run_id']} (experiment {run.mlflow['experiment_id']}, "
            f"store {run.mlflow['tracking_uri']})"
        )
        shown = "audit/report.html, " + ("audit/report.pdf, " if run.paths.get("pdf") else "")
        print(
            f"             artifacts {shown}audit/audit.json and the findings table "
            f"audit/findings.json under {run.mlflow['artifact_uri']}"
        )
        registration = r.metadata.mitigation_registration
        if run.mlflow.get("mitigated_model_uri"):
            print(
                f"Mitigated:   {run.mlflow['mitigated_model_uri']} (RTDP rule around the "
                "audited model; audit it with threshold: null)"
            )
            if registration is not None and registration.reason:
                print(f"             registered: {registration.reason}")
        elif registration is not None:
            print(f"Mitigated:   not registered because {registration.reason}")
        print(f"Browse:      mlflow ui --backend-store-uri {run.mlflow['tracking_uri']}")


# --------------------------------------------------------------------------- fairengine history
def _add_history_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    history = sub.add_parser(
        "history",
        help="list past audits from MLflow (date, model version, verdict, counts, run id)",
        description="List the audits recorded in MLflow, newest first: when each ran, the "
        "audited model's name and version, the verdict, the counts of rejected / not rejected / "
        "undetermined deciding tests, and the MLflow run id (audit runs and evaluation runs "
        "of the fairengine evaluator).",
        parents=[common],
    )
    history.add_argument("--model", "-m", default=None, help="only audits of this registered model")
    history.add_argument(
        "--experiment", "-e", default=None, help="only this experiment (default: every one)"
    )
    history.add_argument(
        "--format",
        "-f",
        choices=("table", "json", "csv"),
        default="table",
        help="output format (default table)",
    )
    history.add_argument(
        "--limit", "-n", type=int, default=20, help="at most this many audits (default 20)"
    )
    history.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow store or server (default: $MLFLOW_TRACKING_URI, else "
        "$FAIRENGINE_HOME/mlflow.db)",
    )


def _history(args: argparse.Namespace) -> int:
    from fairengine.errors import MlflowUnavailableError
    from tasks.audit_history_list import format_entries, list_audits
    from tasks.mlflow_store import check_tracking_store
    from tasks.settings import default_tracking_uri

    tracking_uri = args.tracking_uri or default_tracking_uri()
    store = check_tracking_store(tracking_uri)
    if not store.reachable:
        raise MlflowUnavailableError(f"{store.reason}; cannot list audits")
    db = tracking_uri.split("sqlite:///", 1)[1] if tracking_uri.startswith("sqlite:///") else None
    if db is not None and not Path(db).expanduser().is_file():  # nothing logged: none created
        entries = []
    else:
        entries = list_audits(
            tracking_uri, model=args.model, experiment=args.experiment, limit=args.limit
        )
    print(format_entries(entries, args.format).rstrip("\n"))
    return 0


COMPARE_EPILOG = """\
exit codes:
  0  the candidate is shown not worse than the baseline by more than delta on every tested gap
     (with --gate no-worse: no gap shown worse)
  1  otherwise: some gap shown worse, or non-inferiority not shown (the output says which)
  2  bad input; 3 MLflow unavailable; 4 internal error
"""


def _add_compare_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    compare = sub.add_parser(
        "compare",
        help="compare a candidate model's fairness gaps with a baseline's (paired tests)",
        description="Score the audit data of --config with both models and compare every gap "
        "(selection rate, TPR, FPR; every pair of groups of every protected attribute): a "
        "paired bootstrap bounds Δ = |gap(candidate)| − |gap(baseline)| for all gaps at once "
        "(family-wise alpha), and the candidate passes when every Δ is shown below delta "
        "(non-inferiority). Writes comparison.json and comparison.html; logs an MLflow run and "
        "tags the candidate version unless --no-mlflow.",
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=COMPARE_EPILOG,
    )
    compare.add_argument("--config", "-c", type=Path, required=True, help="the audit YAML file")
    compare.add_argument(
        "--baseline",
        default=None,
        help="the model to compare against (a model URI, e.g. models:/credit@champion; "
        "default: comparison.baseline of the config)",
    )
    compare.add_argument(
        "--candidate",
        default=None,
        help="the model compared (a model URI, e.g. models:/credit/7; default: model.uri of "
        "the config)",
    )
    compare.add_argument(
        "--delta", type=float, default=None, help="override comparison.delta (margin)"
    )
    compare.add_argument(
        "--gate",
        choices=("non-inferiority", "no-worse"),
        default="non-inferiority",
        help="what exit code 0 requires (default non-inferiority: every gap shown not worse "
        "by more than delta; no-worse: no gap shown worse)",
    )
    compare.add_argument("--tracking-uri", default=None, help="override mlflow.tracking_uri")
    compare.add_argument(
        "--output-dir", type=Path, default=None, help="override output.dir (local copies)"
    )
    compare.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")


def _compare(args: argparse.Namespace) -> int:
    from fairengine.config import AuditConfig, read_config_file

    cfg_path = args.config.expanduser()
    raw = read_config_file(cfg_path)
    if args.tracking_uri:
        raw.setdefault("mlflow", {})["tracking_uri"] = args.tracking_uri
    if args.output_dir:
        raw.setdefault("output", {})["dir"] = str(args.output_dir.resolve())
    if args.no_mlflow:
        raw.setdefault("mlflow", {})["enabled"] = False
    if args.delta is not None:
        raw.setdefault("comparison", {})["delta"] = args.delta
    candidate = args.candidate or (raw.get("model") or {}).get("uri")
    raw.pop("model", None)  # the models are --baseline and --candidate
    base_dir = cfg_path.parent.resolve()
    cfg = AuditConfig.from_dict(raw, base_dir=base_dir)
    baseline = args.baseline or cfg.comparison.baseline
    from fairengine.errors import ConfigError

    if not baseline or not candidate:
        raise ConfigError(
            "compare needs two models: --baseline (or comparison.baseline in the config) and "
            "--candidate (or model.uri in the config)"
        )
    from flows.preflight import preflight

    checked = preflight({**raw, "model": {"uri": candidate}}, base_dir)
    CONSOLE.say(f"Checked the config and {checked.n_rows:,} rows of data")
    if checked.mlflow_down:
        assert checked.store is not None
        from fairengine.errors import MlflowUnavailableError

        raise MlflowUnavailableError(checked.store.reason)
    start = time.perf_counter()
    if not args.debug:
        quiet_engine_tracebacks()
    from flows.compare import run_comparison

    CONSOLE.say(f"Comparing {candidate} (candidate) with {baseline} (baseline) ...")
    run = in_worker_thread(lambda: run_comparison(raw, baseline, candidate, str(base_dir)))
    CONSOLE.say(f"Comparison finished in {time.perf_counter() - start:.1f} s")
    c = run.comparison
    print(f"Verdict:     {c.verdict.status.upper().replace('_', ' ')} - {c.verdict.summary}")
    print(f"Report:      {run.paths['report']}")
    print(f"JSON:        {run.paths['json']}")
    if run.mlflow:
        print(f"MLflow run:  {run.mlflow['run_id']} ({run.mlflow['tracking_uri']})")
    if args.gate == "no-worse":
        return EXIT_FAIL if c.verdict.status == "worse" else 0
    return 0 if c.verdict.status == "not_worse" else EXIT_FAIL


if __name__ == "__main__":
    raise SystemExit(main())
