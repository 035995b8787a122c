"""The demo audit, cold, on Adult-sized data with every method on (issue 8: "under 3 minutes on
2 cores; per-step timings in the report's metadata").

Set-up (everything in a temporary FairEngine home, MLflow store and Prefect home):

* data: UCI Adult (:func:`fairengine.datasets.load_adult`, train + test files), rows with a
  missing workclass/occupation/native-country dropped (45,222 rows). Features: the 5 continuous
  columns standardised on the train file plus every one-hot workclass, marital status,
  occupation and relationship level (all numeric, so FlipTest's transport maps and the gradient
  attack work on them; levels absent from a group are held fixed by its maps);
  ``sex`` and ``race`` are the protected attributes and not model inputs.
* model: scikit-learn ``LogisticRegression`` fitted on the train-file rows, logged and
  registered in the temporary MLflow store (``pyfunc_predict_fn="predict_proba"``, explicit pip
  requirements); the audit loads it by ``models:/adult-income/1`` and unwraps it for the
  individual-fairness test (exact torch conversion).
* audit table: all 45,222 cleaned rows (``--rows test``: only the test file's 15,060).
* methods: every one enabled (mitigation included) with its documented defaults
  (``--fliptest-attributes`` limits FlipTest to some protected attributes;
  ``--fliptest-refits`` lowers its refit counts).
* cold: an empty cache directory, a fresh Prefect home (the embedded server starts in the run),
  run in a fresh process through :func:`flows.audit.run_audit`.

Usage::

    .venv/bin/python benchmarks/full_audit_adult.py                 # product defaults
    .venv/bin/python benchmarks/full_audit_adult.py --fliptest-attributes sex

Writes ``benchmarks/results/full_audit_adult.md`` (``--out`` to change).

Before/after a change (issue 23: "the speed work changes no decision")::

    .venv/bin/python benchmarks/full_audit_adult.py --compare BEFORE/audit.json AFTER/audit.json

prints a markdown comparison of every finding of two audits at the same settings: decisions
equal, exact estimates equal, resampling p-values within Monte-Carlo error (|z| of the
difference of the two estimates S/n against its binomial standard error).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ADULT = REPO.parent / "shared" / "data" / "adult"
RESULTS = Path(__file__).resolve().parent / "results"
CONTINUOUS = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
CATEGORICAL = ["workclass", "marital_status", "occupation", "relationship"]
MODEL_NAME = "adult-income"


def isolate(home: Path) -> None:
    """Point FairEngine, MLflow and Prefect at ``home`` and switch telemetry off; call before
    importing prefect or mlflow."""
    sys.path.insert(0, str(REPO))
    os.environ.update(
        {
            "FAIRENGINE_HOME": str(home / "fairengine"),
            "MLFLOW_TRACKING_URI": f"sqlite:///{home / 'mlflow.db'}",
            "PREFECT_HOME": str(home / "prefect"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
            "PREFECT_LOGGING_LEVEL": "WARNING",
            "DO_NOT_TRACK": "true",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "GX_ANALYTICS_ENABLED": "false",
            "MPLBACKEND": "Agg",
        }
    )
    for key in ("PREFECT_API_URL", "PREFECT_API_KEY", "MLFLOW_REGISTRY_URI"):
        os.environ.pop(key, None)


@dataclass
class PreparedAdult:
    """A registered Adult model and the audit table, ready to audit."""

    data_path: Path
    model_uri: str
    features: list[str]
    n_rows: int
    n_train: int
    seconds: float


def adult_table(adult_dir: Path = ADULT) -> tuple[Any, list[str], Any, Any]:
    """The numeric Adult audit table (all cleaned rows), the model's feature columns, the
    logistic regression fitted on the train-file rows and the train-file row mask."""
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    from fairengine.datasets import load_adult

    frame = load_adult(adult_dir, split="both").frame
    keep = frame[["workclass", "occupation", "native_country"]].notna().all(axis=1)
    f = frame.loc[keep].reset_index(drop=True)
    train = (f["split"] == "train").to_numpy()
    cont = f[CONTINUOUS].astype(float)
    cont = (cont - cont[train].mean()) / cont[train].std()
    dummies = pd.get_dummies(f[CATEGORICAL].astype(str), prefix_sep="=").astype(float)
    dummies.columns = [c.replace(" ", "_").replace("-", "_") for c in dummies.columns]
    table = pd.concat([cont, dummies, f[["sex", "race"]].astype(str), f[["income_gt_50k"]]], axis=1)
    features = [*CONTINUOUS, *dummies.columns]
    model = LogisticRegression(max_iter=2000).fit(
        table.loc[train, features], table.loc[train, "income_gt_50k"]
    )
    return table, features, model, train


def adult_dataset(adult_dir: Path = ADULT) -> tuple[Any, Any, list[str], Any]:
    """The Adult audit table as an :class:`~fairengine.dataset.AuditDataset` scored by the
    logistic regression (threshold 0.5; ``sex`` and ``race`` protected), the table, the
    model's feature columns and the model."""
    from fairengine.dataset import AuditDataset
    from fairengine.roles import ColumnRoles

    table, features, model, _ = adult_table(adult_dir)
    table["score"] = model.predict_proba(table[features])[:, 1]
    ds = AuditDataset.from_frame(
        table,
        ColumnRoles(
            label="income_gt_50k",
            protected=("sex", "race"),
            score="score",
            features=tuple(features),
        ),
        threshold=0.5,
    )
    return ds, table, features, model


def prepare_adult(
    home: Path, rows: str = "all", seed: int = 0, adult_dir: Path = ADULT
) -> PreparedAdult:
    """Write the numeric Adult audit table and register the logistic-regression model."""
    import mlflow
    from mlflow import MlflowClient
    from sklearn import __version__ as sklearn_version

    start = time.perf_counter()
    table, features, model, train = adult_table(adult_dir)

    uri = os.environ["MLFLOW_TRACKING_URI"]
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    exp_id = client.create_experiment(
        "adult-models", artifact_location=(home / "model-artifacts").as_uri()
    )
    with mlflow.start_run(experiment_id=exp_id, run_name="train-adult-lr"):
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            registered_model_name=MODEL_NAME,
            pyfunc_predict_fn="predict_proba",
            pip_requirements=[f"scikit-learn=={sklearn_version}"],
        )
    audit = table if rows == "all" else table.loc[~train]
    data_path = home / "adult_audit.csv"
    audit.to_csv(data_path, index=False)
    return PreparedAdult(
        data_path=data_path,
        model_uri=f"models:/{MODEL_NAME}/{info.registered_model_version}",
        features=features,
        n_rows=len(audit),
        n_train=int(train.sum()),
        seconds=time.perf_counter() - start,
    )


def audit_config(
    prepared: PreparedAdult,
    home: Path,
    *,
    fliptest_attributes: list[str] | None = None,
    fliptest_refits: int | None = None,
    n_permutations: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Every method on with its defaults (apart from the given overrides)."""
    fliptest: dict[str, Any] = {"enabled": True}
    if fliptest_attributes:
        fliptest["attributes"] = fliptest_attributes
    if fliptest_refits is not None:
        fliptest.update(
            n_permutations=fliptest_refits, n_selfmap=fliptest_refits, n_bootstrap=fliptest_refits
        )
    methods: dict[str, Any] = {
        "group_parity": {"enabled": True},
        "group_metrics": {"enabled": True},
        "permutation_tests": {"enabled": True},
        "intersectional": {"enabled": True},
        "fliptest": fliptest,
        "individual_fairness": {"enabled": True},
        "mitigation": {"enabled": True},
    }
    if n_permutations is not None:
        methods["permutation_tests"]["n_permutations"] = n_permutations
    return {
        "name": "adult-full",
        "data": {"path": str(prepared.data_path)},
        "columns": {
            "label": "income_gt_50k",
            "protected": ["sex", "race"],
            "features": prepared.features,
        },
        "model": {"uri": prepared.model_uri},
        "score_type": "probability",
        "threshold": 0.5,
        "methods": methods,
        "seed": seed,
        "output": {"dir": str(home / "reports")},
        "cache": {"dir": str(home / "cache")},
        "mlflow": {"experiment": "adult-audits"},
    }


def machine_line() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    gpu = ""
    if "torch" in sys.modules:  # imported by the audit; a GPU run names its card
        import torch

        if torch.cuda.is_available():
            gpu = f", torch {torch.__version__}, GPU {torch.cuda.get_device_name(0)}"
    return (
        f"{platform.system().lower()}: {os.cpu_count()} CPU cores, Python "
        f"{platform.python_version()}{gpu}; 1-min load average {load:.1f} at the end"
    )


def timing_rows(timings: dict[str, float]) -> list[str]:
    rows = ["| step | seconds |", "|---|---|"]
    for step, sec in sorted(timings.items(), key=lambda kv: -kv[1]):
        rows.append(f"| {step} | {sec:.2f} |")
    return rows


@dataclass(frozen=True)
class FindingRow:
    """One finding of an audit.json, as compared before/after a change."""

    method: str
    decision: str
    estimate: float | None
    pvalue: float | None
    exceedances: tuple[int, ...]
    resamples: tuple[int, ...]


def audit_findings(path: Path) -> dict[str, FindingRow]:
    """Every finding of an audit's JSON by key (decisions as the family decided them)."""
    audit = json.loads(Path(path).read_text())
    out: dict[str, FindingRow] = {}
    for m in audit["methods"]:
        for f in m.get("findings") or []:
            parts = f.get("resampling") or []
            out[f["key"]] = FindingRow(
                method=m["method"],
                decision=str(f.get("decision")),
                estimate=f.get("estimate"),
                pvalue=f.get("pvalue"),
                exceedances=tuple(int(p["exceedances"]) for p in parts),
                resamples=tuple(int(p["resamples"]) for p in parts),
            )
    return out


def monte_carlo_z(before: FindingRow, after: FindingRow) -> float:
    """Largest |z| over the resampling parts: (S_a/n_a − S_b/n_b) over the binomial standard
    error of that difference at the pooled proportion (0 when both are 0 or 1)."""
    worst = 0.0
    for sb, nb, sa, na in zip(
        before.exceedances, before.resamples, after.exceedances, after.resamples, strict=True
    ):
        pooled = (sb + sa) / (nb + na)
        se = (pooled * (1.0 - pooled) * (1.0 / nb + 1.0 / na)) ** 0.5
        diff = sa / na - sb / nb
        worst = max(worst, abs(diff) / se if se > 0 else 0.0)
    return worst


def compare_audits(before_path: Path, after_path: Path) -> list[str]:
    """Markdown lines comparing two audits' findings (module docstring)."""
    before, after = audit_findings(before_path), audit_findings(after_path)
    common = sorted(set(before) & set(after))
    only = sorted(set(before) ^ set(after))
    decisions = [k for k in common if before[k].decision != after[k].decision]

    def same(a: float | None, b: float | None) -> bool:
        if a is None or b is None or isinstance(a, str) or isinstance(b, str):
            return a == b
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))

    estimates = [k for k in common if not same(before[k].estimate, after[k].estimate)]
    exact_p = [
        k for k in common if not before[k].resamples and not same(before[k].pvalue, after[k].pvalue)
    ]
    resampled = [k for k in common if before[k].resamples and after[k].resamples]
    z = {k: monte_carlo_z(before[k], after[k]) for k in resampled}
    far = [k for k in resampled if z[k] > 4.0]
    lines = [
        f"- findings in both audits: {len(common)}; in only one: {len(only)}",
        f"- **decisions that differ: {len(decisions)}**",
        f"- estimates that differ (beyond 1e-9 relative): {len(estimates)}",
        f"- exact p-values that differ: {len(exact_p)}",
        f"- resampling p-values: {len(resampled)}, largest |z| of a difference "
        f"{max(z.values(), default=0.0):.2f}, beyond |z| = 4: {len(far)}",
    ]
    changed = sorted(set(decisions) | set(estimates) | set(exact_p) | set(far) | set(only))
    if changed:
        lines += ["", "| finding | before | after |", "|---|---|---|"]
        for k in changed:
            b, a = before.get(k), after.get(k)
            lines.append(
                f"| {k} | {b and (b.decision, b.estimate, b.pvalue, b.exceedances, b.resamples)} "
                f"| {a and (a.decision, a.estimate, a.pvalue, a.exceedances, a.resamples)} |"
            )
    moved = sorted(k for k in resampled if before[k].resamples != after[k].resamples)
    if moved:
        lines += [
            "",
            "Resampling tests whose resamples changed (the sequential decisions drew more or "
            "fewer):",
            "",
            "| finding | decision | exceedances/resamples before | after | abs z |",
            "|---|---|---|---|---|",
        ]
        for k in moved:
            b, a = before[k], after[k]
            lines.append(
                f"| {k} | {a.decision} | {b.exceedances}/{b.resamples} | "
                f"{a.exceedances}/{a.resamples} | {z[k]:.2f} |"
            )
    return lines


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        print("\n".join(compare_audits(Path(sys.argv[2]), Path(sys.argv[3]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", choices=["all", "test"], default="all")
    ap.add_argument("--adult", type=Path, default=ADULT, help="folder of adult.data.gz/.test.gz")
    ap.add_argument("--fliptest-attributes", nargs="*", default=None)
    ap.add_argument("--fliptest-refits", type=int, default=None)
    ap.add_argument("--out", type=Path, default=RESULTS / "full_audit_adult.md")
    ap.add_argument(
        "--runner",
        choices=["threads", "dask"],
        default="threads",
        help="dask: a local Dask cluster (processes) and a `fairengine server` started for it",
    )
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="fairengine-adult-"))
    isolate(home)
    server = None
    if args.runner == "dask":  # prefect-dask needs a Prefect server: a real one, on 127.0.0.1
        from flows.prefect_server import start_server

        server, _ = start_server(port=0, ui=False, home=home / "fairengine")
        os.environ["PREFECT_API_URL"] = server.api_url
    prepared = prepare_adult(home, rows=args.rows, adult_dir=args.adult)
    config = audit_config(
        prepared,
        home,
        fliptest_attributes=args.fliptest_attributes,
        fliptest_refits=args.fliptest_refits,
    )
    print(f"prepared {prepared.n_rows} rows, {prepared.model_uri} in {prepared.seconds:.1f} s")

    from flows.audit import run_audit

    if args.runner == "dask":
        config["runner"] = {"kind": "dask"}
    from fairengine import progress

    first_step: list[float] = []  # when the flow's first step started (after the start-up)

    def on_progress(event: Any) -> None:
        if event.message == "started" and event.step != "prefect_server" and not first_step:
            first_step.append(time.perf_counter())

    progress.set_listener(on_progress)
    t1 = time.perf_counter()
    try:
        run = run_audit(config)
    finally:
        if server is not None:
            from flows.prefect_server import stop_server

            stop_server(home=home / "fairengine")
    wall = time.perf_counter() - t1
    result = run.result
    timings = result.metadata.timings
    stored = json.loads(Path(run.paths["json"]).read_text())
    assert stored["metadata"]["timings"] == timings  # the timings are in the report's JSON
    html = Path(run.report_path).read_text()
    statuses = {m.method: m.status for m in result.methods}
    progress.set_listener(None)
    to_first = first_step[0] - t1 if first_step else float("nan")
    print(f"audit wall {wall:.1f} s; first step after {to_first:.1f} s; statuses {statuses}")
    print(f"audit json: {run.paths['json']}")

    method_names = [m.method for m in result.methods]
    restricted = bool(args.fliptest_attributes) or args.fliptest_refits is not None
    accounted = sum(v for k, v in timings.items() if k.split(" ")[0] not in method_names)
    slowest = max((k for k in timings if k in method_names), key=lambda k: timings[k])
    ft = result.method("fliptest")
    lines = [
        "# Full audit on Adult, cold, every method on",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        "- command: `.venv/bin/python benchmarks/full_audit_adult.py"
        + (f" --rows {args.rows}" if args.rows != "all" else "")
        + (
            f" --fliptest-attributes {' '.join(args.fliptest_attributes)}"
            if args.fliptest_attributes
            else ""
        )
        + (f" --fliptest-refits {args.fliptest_refits}" if args.fliptest_refits else "")
        + (f" --runner {args.runner}" if args.runner != "threads" else "")
        + "`",
        f"- machine: {machine_line()}.",
        f"- data: Adult, {prepared.n_rows:,} audited rows, {len(prepared.features)} numeric "
        f"features; model `{prepared.model_uri}` (LogisticRegression fitted on the "
        f"{prepared.n_train:,} train-file rows); set-up (load, train, register) "
        f"{prepared.seconds:.1f} s, not counted below.",
        (
            "- cold: empty cache, fresh Prefect home (embedded server started inside the run), "
            "fresh process; default thread-pool runner."
            if args.runner == "threads"
            else "- cold: empty cache, fresh Prefect home with a `fairengine server` started "
            "before the run (not timed), fresh process; `runner: dask` (local cluster, "
            "2 worker processes x 1 thread)."
        ),
        f"- FlipTest: attributes {ft.parameters.get('attributes') or 'all (sex, race)'}, "
        f"refits {ft.parameters.get('n_permutations')}/{ft.parameters.get('n_selfmap')}/"
        f"{ft.parameters.get('n_bootstrap')} (permutation/self-map/bootstrap), "
        f"max_per_group {ft.parameters.get('max_per_group')}.",
        "",
        f"**Wall time of `run_audit` (cold): {wall:.1f} s** "
        f"({'under' if wall < 180 else 'OVER'} the 3-minute target"
        + (
            " with FlipTest reduced as above; NOT with FlipTest's defaults). "
            if restricted
            else "). "
        )
        + f"The flow's first step started {to_first:.1f} s after `run_audit` was called "
        "(Prefect's embedded server start and the start-up before it). "
        + f"Verdict {result.verdict.status}; method statuses: "
        + ", ".join(f"{k} {v}" for k, v in statuses.items())
        + ".",
        "",
        "## Per-step timings (`result.metadata.timings`, also in audit.json and the report)",
        "",
        *timing_rows(timings),
        "",
        f"- methods run concurrently on the thread pool, so the method rows overlap; the "
        f"non-method steps sum to {accounted:.1f} s; the rest of the wall time "
        f"({wall - accounted - max(timings[m] for m in method_names if m in timings):.1f} s "
        "beyond the non-method steps and the slowest method) is the embedded Prefect server "
        "start, task orchestration, the verdict, the MLflow lookup of earlier audits, the local "
        "files and the MLflow logging, which the flow does not time.",
        f"- slowest method: **{slowest}** ({timings[slowest]:.1f} s).",
        "- devices (`device: auto` by default, as recorded in each method's parameters): "
        + ", ".join(
            f"{m.method} {m.parameters['device']}"
            for m in result.methods
            if m.parameters.get("device") is not None
        )
        + ".",
        f"- the report's HTML names the slowest step: {'yes' if slowest in html else 'no'}.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
