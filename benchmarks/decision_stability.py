"""Decisions across seeds (issue "Decisions users can trust"): the same audit run with 5 seeds
must give identical decisions, except tests reported as undetermined.

Audits (each in one process through :func:`flows.audit.run_audit`, MLflow and the cache off):

* the demo (Lipton hiring data, the model ``fairengine demo`` registers, every method its
  ``audit.yaml`` turns on; mitigation not registered);
* COMPAS (ProPublica two-year file, race x sex, score ``decile_score / 10``, threshold 0.45,
  intersectional over race x sex), once with ``decisions.gap_null: tolerance`` (default) and
  once with ``zero`` (the permutation tests decide the rate gaps).

For each audit and seed: the decision of every deciding finding, the counts, the permutations
the decision step drew and its time. A finding "changes" when two seeds give two different
settled decisions (reject vs not rejected); undetermined is allowed to differ. For comparison,
the fixed-B decision (Holm on the first T permutations' p-values, as before this change) is
counted too.

Usage::

    .venv/bin/python benchmarks/decision_stability.py [--seeds 5] [--skip-demo]

Writes ``benchmarks/results/decision_stability.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO))


def _isolate(home: Path) -> None:
    os.environ.update(
        {
            "FAIRENGINE_HOME": str(home / "fairengine-runs"),
            "PREFECT_HOME": str(home / "prefect"),
            "MLFLOW_TRACKING_URI": f"sqlite:///{home / 'mlflow.db'}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "true",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "GX_ANALYTICS_ENABLED": "false",
            "PREFECT_LOGGING_LEVEL": "WARNING",
        }
    )


def compas_config(home: Path, gap_null: str) -> dict[str, Any]:
    import pandas as pd

    path = home / "compas_scored.csv"
    if not path.exists():
        df = pd.read_csv(SHARED / "data" / "compas" / "compas-scores-two-years.csv.gz")
        df = df.loc[:, ~df.columns.duplicated()]
        df = df[["sex", "race", "age_cat", "decile_score", "two_year_recid"]].copy()
        df["score"] = df["decile_score"] / 10
        df.to_csv(path, index=False)
    return {
        "data": {"path": str(path)},
        "columns": {"label": "two_year_recid", "protected": ["race", "sex"], "score": "score"},
        "threshold": 0.45,
        "validation": {"min_group_size": 10},
        "methods": {"intersectional": {"attributes": ["race", "sex"]}},
        "decisions": {"gap_null": gap_null},
        "mlflow": {"enabled": False},
        "cache": {"enabled": False},
    }


def demo_config(home: Path) -> dict[str, Any]:
    from flows.demo import prepare_demo

    prepared = prepare_demo(progress=lambda _m: None)
    cfg = dict(prepared.config)
    cfg["data"] = {"path": str(prepared.data_path)}
    methods = dict(cfg["methods"])
    methods["mitigation"] = {**methods["mitigation"], "register": False}
    cfg["methods"] = methods
    cfg["mlflow"] = {"enabled": False}
    cfg["cache"] = {"enabled": False}
    return cfg


def fixed_b_decisions(result: Any) -> dict[str, str]:
    """Holm on the first T permutations' p-values of every deciding finding (the old rule)."""
    from fairengine.multiplicity import adjust_pvalues

    deciding = [f for f in result.findings() if f.counts]
    first = []
    for f in deciding:
        if f.resampling:
            # the method's own first batch is recorded in its details; p from the final counts
            # would already include the sequential draws, so recompute from details when we can
            first.append(_first_batch_pvalue(result, f))
        else:
            first.append(f.pvalue)
    adj = adjust_pvalues(first, "holm")  # the rule before the sequential decisions
    return {
        f.key: ("reject" if p <= result.alpha else "fail_to_reject")
        for f, p in zip(deciding, adj, strict=True)
    }


def _first_batch_pvalue(result: Any, finding: Any) -> float:
    from fairengine.permutation.result import PermutationDetails

    for m in result.methods:
        if m.method == "permutation_tests" and isinstance(m.details, PermutationDetails):
            for t in m.details.tests:
                if t.key == finding.key:
                    return float(t.pvalue)
    return float(finding.pvalue)


def run(name: str, cfg: dict[str, Any], seeds: int) -> dict[str, Any]:
    from flows.audit import run_audit

    runs = []
    for seed in range(seeds):
        start = time.perf_counter()
        out = run_audit({**cfg, "seed": seed})
        r = out.result
        runs.append(
            {
                "seed": seed,
                "seconds": time.perf_counter() - start,
                "decide_seconds": r.metadata.timings.get("decide"),
                "decisions": {f.key: f.decision for f in r.findings() if f.counts},
                "fixed": fixed_b_decisions(r),
                "record": r.decisions,
                "verdict": r.verdict.status,
            }
        )
        rec = r.decisions
        print(
            f"{name} seed {seed}: {r.verdict.status} rejected {rec.n_rejected} "
            f"not {rec.n_not_rejected} undetermined {rec.n_undetermined} drawn "
            f"{rec.resamples_drawn} in {runs[-1]['seconds']:.1f} s",
            flush=True,
        )
    keys = sorted(set().union(*(set(x["decisions"]) for x in runs)))
    changed = []
    changed_fixed = []
    for k in keys:
        settled = {x["decisions"].get(k) for x in runs} - {"undetermined", None}
        if len(settled) > 1:
            changed.append(k)
        if len({x["fixed"].get(k) for x in runs} - {None}) > 1:
            changed_fixed.append(k)
    return {"name": name, "runs": runs, "keys": keys, "changed": changed, "fixed": changed_fixed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/decision_stability.md"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fairengine-stability-") as tmp:
        home = Path(tmp)
        _isolate(home)
        audits = []
        if not args.skip_demo:
            audits.append(run("demo", demo_config(home), args.seeds))
        audits.append(
            run("COMPAS, gap_null tolerance", compas_config(home, "tolerance"), args.seeds)
        )
        audits.append(run("COMPAS, gap_null zero", compas_config(home, "zero"), args.seeds))
    lines = [
        "# Decisions across seeds",
        "",
        f"`.venv/bin/python benchmarks/decision_stability.py --seeds {args.seeds}` "
        "(2-core machine; cache and MLflow off; see the script's docstring for the set-up).",
        "",
        "| audit | deciding tests | seeds | settled decisions that differ between seeds | "
        "undetermined per seed | permutations drawn by the decision step per seed | "
        "fixed-B (first T permutations, Holm) decisions that differ between seeds | "
        "audit time per seed (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in audits:
        und = ", ".join(str(x["record"].n_undetermined) for x in a["runs"])
        drawn = ", ".join(f"{x['record'].resamples_drawn:,}" for x in a["runs"])
        secs = ", ".join(f"{x['seconds']:.0f}" for x in a["runs"])
        lines.append(
            f"| {a['name']} | {len(a['keys'])} | {len(a['runs'])} | {len(a['changed'])}"
            f"{' (' + ', '.join(a['changed']) + ')' if a['changed'] else ''} | {und} | {drawn} | "
            f"{len(a['fixed'])}{' (' + ', '.join(a['fixed']) + ')' if a['fixed'] else ''} | "
            f"{secs} |"
        )
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
