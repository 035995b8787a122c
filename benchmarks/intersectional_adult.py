"""Adult audit: sex × age bin × race on the data and on a trained model's outputs.

The seed paper's Adult experiment (Morina et al., §6: gender, binned age, race; an XGBoost score)
with FairEngine's estimators. The paper's binning and numbers are not available (notes §1.1),
so this reports two binnings of age (3 bins: ≤25, 26–45, >45 → 30 intersections; 5 bins:
≤25, 26–35, 36–45, 46–55, >55 → 50 intersections) and race with its 5 UCI categories.

* On data: elift and slift of the label over all 48,842 rows (train + test).
* On the model: a logistic regression (scikit-learn, one-hot categoricals, standardised
  numerics, every UCI feature including sex and race) trained on ``adult.data`` and scored on
  ``adult.test`` (16,281 rows), threshold 0.5; sp, tpr, fpr, eo on the test rows.

Run: ``nice -n 10 .venv/bin/python benchmarks/intersectional_adult.py`` (reads
``../shared/data/adult``; writes ``benchmarks/results/intersectional_adult.md``).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairengine.dataset import AuditDataset
from fairengine.datasets import load_adult
from fairengine.datasets.adult import FEATURES, NUMERIC
from fairengine.intersectional import IntersectionalConfig, run_intersectional
from fairengine.intersectional.result import IntersectionalDetails
from fairengine.roles import ColumnRoles

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
BINNINGS = {
    "3 age bins": [0, 25, 45, 200],
    "5 age bins": [0, 25, 35, 45, 55, 200],
}


def train_scores(frame: pd.DataFrame) -> tuple[np.ndarray, float]:
    """Fit a logistic regression on the train split; return test scores and test accuracy."""
    feats = [c for c in FEATURES if c != "fnlwgt"]
    num = [c for c in feats if c in NUMERIC]
    cat = [c for c in feats if c not in NUMERIC]
    x = frame[feats].copy()
    x[cat] = x[cat].astype(object).fillna("missing")
    pre = ColumnTransformer(
        [("num", StandardScaler(), num), ("cat", OneHotEncoder(handle_unknown="ignore"), cat)]
    )
    model = make_pipeline(pre, LogisticRegression(max_iter=2000))
    train = (frame["split"] == "train").to_numpy()
    model.fit(x[train], frame.loc[train, "income_gt_50k"])
    p = model.predict_proba(x[~train])[:, 1]
    acc = float(np.mean((p > 0.5) == frame.loc[~train, "income_gt_50k"].to_numpy()))
    return p, acc


def section(title: str, res, metrics: list[str]) -> list[str]:
    details = res.details
    assert isinstance(details, IntersectionalDetails)
    g = details.groupings
    inter = next(iter(g))
    lines = [
        f"### {title}",
        "",
        f"{details.n_intersections} intersections of {' × '.join(details.attributes)}"
        f", {details.n_rows:,} rows, outcomes = {details.outcomes}, "
        f"{res.seconds:.2f} s.",
        "",
        "| metric | ε smoothed | e^-ε | ε empirical | ε both outcomes | bootstrap 95 % | "
        "Bayes 95 % | headline | min d | driving pair | marginal ε (each attribute) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in metrics:
        d = details.metrics[m][inter]
        b, p = d.estimators.bootstrap, d.estimators.bayesian
        pair = d.pair
        marg = ", ".join(f"{k}: {details.metrics[m][k].epsilon:.2f}" for k in g if k != inter)
        lines.append(
            f"| {m} | {d.epsilon:.3f} | {d.ratio:.3f} | {d.epsilon_empirical:.3f} | "
            f"{d.convention.epsilon_both:.3f} | {b.low:.2f}–{b.high:.2f} | "
            f"{p.low:.2f}–{p.high:.2f} | {d.headline} | {d.min_denominator:g} | "
            f"{pair.high} ({pair.rate_high:.3f}) vs {pair.low} ({pair.rate_low:.3f})"
            f" | {marg} |"
        )
    lines += [
        "",
        "Smallest intersections: "
        + "; ".join(
            f"{s.group} (n={s.n:g}, positives={s.positives:g}, {s.status})"
            for s in details.smallest
        ),
        "",
    ]
    sparse = {r: v for m in metrics for r, v in details.metrics[m][inter].sparse.items()}
    for r, v in sparse.items():
        lines.append(
            f"- sparse for {r} (d < 30, included and flagged): {len(v)}: "
            + ", ".join(v[:8])
            + (" …" if len(v) > 8 else "")
        )
    excl = {r: v for m in metrics for r, v in details.metrics[m][inter].excluded.items()}
    for r, v in excl.items():
        lines.append(
            f"- excluded for {r} (empty or no denominator): {len(v)}"
            + (": " + ", ".join(v) if v else "")
        )
    if res.warnings:
        lines += ["", "Warnings:", *[f"- {w}" for w in res.warnings]]
    lines.append("")
    return lines


def main() -> None:
    start = time.perf_counter()
    adult = load_adult(DATA)
    frame = adult.frame
    lines = [
        "# Intersectional audit of UCI Adult: sex × age bin × race",
        "",
        f"- Date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs)",
        "- Command: `nice -n 10 .venv/bin/python benchmarks/intersectional_adult.py`",
        "- Estimators: smoothed α = β = 0.5; bootstrap B = 2,000 (multinomial over cells); "
        "Bayesian Beta(0.5, 0.5), M = 4,000; seed 0. Headline interval: Bayesian when the "
        "smallest auditable denominator has < 30 rows, else bootstrap. Support policy: "
        "intersections with d ≥ 1 enter ε; d < 30 are flagged sparse.",
        "",
    ]
    data_ds = AuditDataset.from_frame(frame, adult.roles)
    scores, acc = train_scores(frame)
    test = frame[frame["split"] == "test"].reset_index(drop=True).copy()
    test["score"] = scores
    roles = ColumnRoles(adult.roles.label, ("sex", "race"), score="score", features=())
    model_ds = AuditDataset.from_frame(test, roles, threshold=0.5)
    lines += [
        f"Model: logistic regression trained on adult.data (32,561 rows), test accuracy "
        f"{acc:.4f} at threshold 0.5 on adult.test (16,281 rows).",
        "",
    ]
    for name, edges in BINNINGS.items():
        cfg = IntersectionalConfig(attributes=["sex", "age", "race"], bins={"age": edges})
        lines += [f"## {name}", ""]
        res = run_intersectional(
            data_ds, IntersectionalConfig(**{**cfg.__dict__, "metrics": ["elift", "slift"]}), seed=0
        )
        lines += section("On data (labels, train + test)", res, ["elift", "slift"])
        res = run_intersectional(
            model_ds,
            IntersectionalConfig(**{**cfg.__dict__, "metrics": ["sp", "tpr", "fpr", "eo"]}),
            seed=0,
        )
        lines += section("On the model's outputs (test split)", res, ["sp", "tpr", "fpr", "eo"])
    lines.append(f"Total time {time.perf_counter() - start:.1f} s (including training).")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(__file__).resolve().parent / "results" / "intersectional_adult.md"
    out.write_text(text)


if __name__ == "__main__":
    main()
