"""``subgroup_scan`` through the audit flow: a planted mis-calibrated subgroup (young women,
odds × 0.4) is found as the top rule and rejected after the audit's sequential decisions drew
more null scans through the method's resampler; on a calibrated model nothing is rejected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import fairengine


def _frame(n: int, planted: bool, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["Female", "Male"], n)
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    age = rng.integers(18, 70, n)
    p = rng.beta(2, 3, n)
    q = np.where((sex == "Female") & (age < 30), 0.4 if planted else 1.0, 1.0)
    y = (rng.random(n) < q * p / (1 - p + q * p)).astype(int)
    return pd.DataFrame({"sex": sex, "race": race, "age": age, "y": y, "s": p})


def _audit(frame: pd.DataFrame, out: Path) -> fairengine.AuditResult:
    return fairengine.audit(
        frame, label="y", protected=["sex", "race"], score="s",
        methods={"subgroup_scan": {"features": ["age"], "levels": 4, "min_draws": 99}},
        output={"dir": str(out)},
    )  # fmt: skip


def test_a_planted_subgroup_is_rejected_through_the_decisions(session_tmp: Path) -> None:
    res = _audit(_frame(4000, True, 0), session_tmp / "scan-planted")
    assert {m.method: m.status for m in res.methods}["subgroup_scan"] == "ok"
    top = next(f for f in res.findings() if f.key == "scan_calibration.1")
    assert top.decision == "reject"
    assert "sex = Female" in top.label and "age" in top.label
    # the method drew 99 null scans; the decisions drew more before rejecting at the
    # multiplicity-adjusted level
    assert sum(p.resamples for p in top.resampling) > 99


def test_a_calibrated_model_is_not_rejected(session_tmp: Path) -> None:
    res = _audit(_frame(4000, False, 1), session_tmp / "scan-null")
    scan = [f for f in res.findings() if f.key.startswith("scan_calibration.")]
    assert scan and all(f.decision != "reject" for f in scan)
