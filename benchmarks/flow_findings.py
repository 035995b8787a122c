"""Every finding of three audits run through the real flow, for before/after comparisons of a
refactoring (issue "One method contract": behaviour unchanged).

Audits (``flows.audit.run_audit``, seed 0, cache off, MLflow used only for the models):

* the demo (``fairengine demo``'s data, model and ``audit.yaml``; no model registration);
* COMPAS (race x sex, ``decile_score / 10``, threshold 0.45; ``decision_stability.py``'s set-up);
* Adult (``full_audit_adult.py``'s set-up: every method on at its defaults).

Writes ``{audit: {"verdict": ..., "findings": {key: {estimate, pvalue, adjusted_pvalue,
decision}}}}`` as JSON. Run it in two checkouts and compare the files with
``benchmarks/compare_findings.py``-style code (``--compare BEFORE AFTER`` here).

Usage::

    .venv/bin/python benchmarks/flow_findings.py --out FILE [--skip-adult]
    .venv/bin/python benchmarks/flow_findings.py --compare BEFORE.json AFTER.json --md OUT.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(Path.cwd()))  # the checkout being measured (run from its root)
sys.path.insert(1, str(HERE))


def _findings(result: Any) -> dict[str, Any]:
    return {
        "verdict": result.verdict.status,
        "details": {m.method: m.to_dict()["details"] for m in result.methods},
        "findings": {
            f.key: {
                "estimate": f.estimate,
                "pvalue": f.pvalue,
                "adjusted_pvalue": f.adjusted_pvalue,
                "decision": f.decision,
            }
            for f in result.findings()
        },
    }


def collect(skip_adult: bool) -> dict[str, Any]:
    from decision_stability import _isolate, compas_config, demo_config
    from full_audit_adult import audit_config, prepare_adult

    from flows.audit import run_audit

    out: dict[str, Any] = {}
    home = Path(tempfile.mkdtemp(prefix="flow-findings-"))
    _isolate(home)
    out["demo"] = _findings(run_audit({**demo_config(home), "seed": 0}).result)
    print("demo done", flush=True)
    out["compas"] = _findings(run_audit({**compas_config(home, "tolerance"), "seed": 0}).result)
    print("compas done", flush=True)
    if not skip_adult:
        prepared = prepare_adult(home)
        cfg = audit_config(prepared, home)
        cfg["mlflow"] = {"enabled": False}
        cfg["cache"] = {"enabled": False}
        out["adult"] = _findings(run_audit(cfg).result)
        print("adult done", flush=True)
    return out


MOVED_OUT_OF_DETAILS = {"artifacts"}
"""Keys format 2 moved from a method's details to its result (FlipTest's map files)."""
VOLATILE_KEYS = {"seconds", "folder", "path"}
"""Keys whose values differ between any two runs: times, and the temporary map folder (and the
map files in it) of a run whose cache is off."""


def details_differences(before: Any, after: Any, path: str = "") -> list[str]:
    """Where two methods' details JSON differ, ignoring keys only ``after`` has whose value is
    null (an optional field format 2 writes as null where format 1 left the key out), keys
    :data:`MOVED_OUT_OF_DETAILS` and :data:`VOLATILE_KEYS`; NaN equals NaN (JSON strings)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for k in sorted(set(before) | set(after)):
            if k in MOVED_OUT_OF_DETAILS or k in VOLATILE_KEYS:
                continue
            if k not in before:
                if after[k] is not None:
                    out.append(f"{path}.{k}: only after")
            elif k not in after:
                out.append(f"{path}.{k}: only before")
            else:
                out += details_differences(before[k], after[k], f"{path}.{k}")
        return out
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return [f"{path}: {len(before)} vs {len(after)} items"]
        return [
            d
            for i, (x, y) in enumerate(zip(before, after, strict=True))
            for d in details_differences(x, y, f"{path}[{i}]")
        ]
    if isinstance(before, float) and isinstance(after, float) and before == after:
        return []
    return [] if before == after else [f"{path}: {before!r} vs {after!r}"]


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines = []
    for audit in sorted(set(before) | set(after)):
        b, a = before.get(audit), after.get(audit)
        if b is None or a is None:
            lines.append(f"| {audit} | only in {'after' if b is None else 'before'} | | | |")
            continue
        keys = set(b["findings"]) | set(a["findings"])
        only = len(keys ^ (set(b["findings"]) & set(a["findings"])))
        differ = {
            field: sum(
                1
                for k in keys
                if k in b["findings"]
                and k in a["findings"]
                and b["findings"][k][field] != a["findings"][k][field]
            )
            for field in ("estimate", "pvalue", "adjusted_pvalue", "decision")
        }
        if "details" in b and "details" in a:
            methods = set(b["details"]) | set(a["details"])
            diffs = {
                m: details_differences(b["details"].get(m), a["details"].get(m), m)
                for m in sorted(methods)
            }
            details_cell = f"{sum(1 for d in diffs.values() if d)} of {len(methods)}"
            for m, d in diffs.items():
                if d:
                    print(f"{audit} {m}: {len(d)} difference(s), e.g. {d[:3]}", file=sys.stderr)
        else:
            details_cell = "not recorded"
        lines.append(
            f"| {audit} | {len(keys)} | {only} | {differ['estimate']} | {differ['pvalue']} | "
            f"{differ['adjusted_pvalue']} | {differ['decision']} | "
            f"{b['verdict']} → {a['verdict']} | {details_cell} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--skip-adult", action="store_true")
    ap.add_argument("--compare", nargs=2, type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        rows = compare(before, after)
        text = "\n".join(
            [
                "| audit | findings | in one run only | estimates that differ | p-values that "
                "differ | adjusted p-values that differ | decisions that differ | verdict | "
                "methods whose details differ |",
                "|---|---|---|---|---|---|---|---|---|",
                *rows,
            ]
        )
        print(text)
        if args.md:
            args.md.write_text(text + "\n")
        return
    result = collect(args.skip_adult)
    assert args.out is not None, "--out FILE"
    args.out.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
