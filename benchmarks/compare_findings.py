"""Compare every finding of two runs of ``adult_methods_device.py --findings`` (before and after
a change at the same settings): decisions, estimates and p-values, as a markdown report.

Usage::

    .venv/bin/python benchmarks/compare_findings.py BEFORE.json AFTER.json --out FILE \\
        --before-label c70e2ef --after-label HEAD
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12
    return a == b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--before-label", default="before")
    ap.add_argument("--after-label", default="after")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    before = json.loads(args.before.read_text())
    after = json.loads(args.after.read_text())
    keys = sorted(set(before) | set(after))
    missing = [k for k in keys if k not in before or k not in after]
    common = [k for k in keys if k in before and k in after]
    decision = [k for k in common if before[k]["decision"] != after[k]["decision"]]
    estimate = [k for k in common if not _same(before[k]["estimate"], after[k]["estimate"])]
    pvalue = [k for k in common if not _same(before[k]["pvalue"], after[k]["pvalue"])]
    lines = [
        f"# Findings before ({args.before_label}) and after ({args.after_label}) the speed work",
        "",
        f"- {len(common)} findings in both runs; {len(missing)} in only one",
        f"- **decisions that differ: {len(decision)}**",
        f"- estimates that differ: {len(estimate)}; p-values that differ: {len(pvalue)}",
    ]
    if args.note:
        lines += ["", args.note]
    if decision or estimate or pvalue or missing:
        lines += [
            "",
            "| finding | estimate before → after | p-value before → after "
            "| decision before → after |",
            "|---|---|---|---|",
        ]
        for k in sorted(set(decision) | set(estimate) | set(pvalue)):
            b, a = before[k], after[k]
            lines.append(
                f"| {k} | {b['estimate']} → {a['estimate']} | {b['pvalue']} → {a['pvalue']} | "
                f"{b['decision']} → {a['decision']} |"
            )
        for k in missing:
            lines.append(f"| {k} | only in {'before' if k in before else 'after'} | | |")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
