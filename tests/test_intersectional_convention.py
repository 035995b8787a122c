"""Outcome conventions of intersectional ε: every ε names its convention and shows the other.

ε_positive bounds only the positive-outcome rates (Morina et al.'s tables); ε_both also bounds
the complements (Foulds et al.'s DF, AIF360's smoothed EDF), so ε_both = max(ε_pos(r),
ε_pos(1 − r)). Checked on a table with known counts (closed form and a rerun with the other
``outcomes``), in the report HTML, and on COMPAS.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.dataset import AuditDataset
from fairengine.intersectional import IntersectionalConfig, run_intersectional
from fairengine.intersectional.metrics import EpsilonConventions
from fairengine.intersectional.result import IntersectionalDetails
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit
from tasks.report import fmt_number, render_report

COMPAS = Path(__file__).resolve().parents[2] / "shared" / "data" / "compas"
COMPAS_CSV = COMPAS / "compas-scores-two-years.csv.gz"
GROUPS = [("f", "a"), ("f", "b"), ("m", "a"), ("m", "b")]
N_PER_GROUP = 100
#: positives y = 1 and selections ŷ = 1 per group: high base rates make the negative side
#: (1 − r) dominate slift, low selection rates make the positive side dominate sp.
POSITIVES = [90, 60, 95, 99]
SELECTED = [10, 40, 20, 5]
GROUPING = "sex_x_race"


def _known_counts() -> AuditDataset:
    """Four intersections of 100 rows with exactly ``POSITIVES`` labels and ``SELECTED``
    predictions equal to 1 (the two are independent within a group)."""
    rows = []
    for (sex, race), k, sel in zip(GROUPS, POSITIVES, SELECTED, strict=True):
        y = np.r_[np.ones(k), np.zeros(N_PER_GROUP - k)]
        yhat = np.r_[np.ones(sel), np.zeros(N_PER_GROUP - sel)]
        yhat = yhat[np.random.default_rng(k).permutation(N_PER_GROUP)]
        rows.append(pd.DataFrame({"sex": sex, "race": race, "y": y.astype(int), "score": yhat}))
    frame = pd.concat(rows, ignore_index=True)
    roles = ColumnRoles(label="y", protected=("sex", "race"), score="score")
    return AuditDataset.from_frame(frame, roles, threshold=0.5)


def _cfg(outcomes: str, **kw) -> IntersectionalConfig:
    return IntersectionalConfig(outcomes=outcomes, n_bootstrap=50, n_posterior=50, **kw)


def _closed_form(k: list[int], d: int, alpha: float = 0.5) -> tuple[float, float]:
    """(ε_positive, ε_both) of smoothed rates (k + α)/(d + 2α) over groups of size d."""
    r = (np.asarray(k, dtype=float) + alpha) / (d + 2 * alpha)
    pos = math.log(r.max()) - math.log(r.min())
    neg = math.log((1 - r).max()) - math.log((1 - r).min())
    return pos, max(pos, neg)


def _conventions(res, metric: str, grouping: str = GROUPING) -> EpsilonConventions:
    assert isinstance(res.details, IntersectionalDetails)
    conv = res.details.metrics[metric][grouping].convention
    assert isinstance(conv, EpsilonConventions)
    return conv


@pytest.mark.parametrize("outcomes", ["positive", "both"])
def test_other_convention_equals_a_rerun_with_the_other_outcomes(outcomes: str) -> None:
    ds = _known_counts()
    other = "both" if outcomes == "positive" else "positive"
    res = run_intersectional(ds, _cfg(outcomes), seed=0)
    rerun = run_intersectional(ds, _cfg(other), seed=0)
    est = {f.key: f.estimate for f in res.findings}
    est_other = {f.key: f.estimate for f in rerun.findings}
    n_checked = 0
    assert isinstance(res.details, IntersectionalDetails)
    for metric, per_grouping in res.details.metrics.items():
        for grouping in per_grouping:
            conv = _conventions(res, metric, grouping)
            key = f"df_eps.{metric}.{grouping}"
            assert conv.outcomes == outcomes and conv.other_outcomes == other
            assert conv.epsilon == est[key]
            assert conv.other_epsilon == pytest.approx(est_other[key], abs=1e-12)
            # ε_both bounds both outcomes, so it is never below ε_positive
            assert conv.epsilon_both >= conv.epsilon_positive - 1e-12
            n_checked += 1
    assert n_checked == 18  # 6 metrics x (intersection + 2 marginals)
    # the other convention adds no finding (nothing new can enter the multiplicity family)
    assert [f.key for f in res.findings] == [f.key for f in rerun.findings]


def test_closed_form_on_known_counts() -> None:
    res = run_intersectional(_known_counts(), _cfg("positive"), seed=0)
    for metric, counts in (("slift", POSITIVES), ("sp", SELECTED)):
        pos, both = _closed_form(counts, N_PER_GROUP)
        conv = _conventions(res, metric)
        assert conv.epsilon == pytest.approx(pos, abs=1e-12)
        assert conv.other_epsilon == pytest.approx(both, abs=1e-12)
    # the table is built so that the complement decides slift but not sp
    slift, sp = _conventions(res, "slift"), _conventions(res, "sp")
    assert slift.epsilon_both > slift.epsilon_positive + 1.0
    assert sp.epsilon_both == pytest.approx(sp.epsilon_positive, abs=1e-12)


def test_label_and_reading_name_the_convention_and_the_other_value() -> None:
    res = run_intersectional(_known_counts(), _cfg("positive", target_epsilon=0.5), seed=0)
    f = next(f for f in res.findings if f.key == f"df_eps.slift.{GROUPING}")
    conv = _conventions(res, "slift")
    assert "positive outcome only, Morina et al." in f.label
    assert "ε (positive outcome only, Morina et al.) = " in f.reading
    assert (
        "Under both outcomes, as Foulds et al. and AIF360 compute it "
        f"(bounding P(y=1 | s) and P(y=0 | s)): ε = {conv.other_epsilon:.3f}"
    ) in f.reading
    assert "positive outcome only, Morina et al." in f.null_hypothesis
    assert f.pvalue is not None  # the configured convention is tested
    # AIF360 is cited only where it computes that ε (sp, slift), not for TPR parity
    tpr = next(f for f in res.findings if f.key == f"df_eps.tpr.{GROUPING}")
    assert "as Foulds et al. compute it (bounding TPR and FNR)" in tpr.reading
    assert "AIF360" not in tpr.reading

    both = run_intersectional(_known_counts(), _cfg("both"), seed=0)
    fb = next(f for f in both.findings if f.key == f"df_eps.slift.{GROUPING}")
    assert "both outcomes, Foulds et al. / AIF360" in fb.label
    assert (
        "Under the positive outcome only, as Morina et al. compute it (bounding P(y=1 | s)): "
        f"ε = {_conventions(both, 'slift').other_epsilon:.3f}"
    ) in fb.reading


def test_report_shows_the_convention_and_both_values() -> None:
    ds = _known_counts()
    res = run_intersectional(ds, _cfg("positive"), seed=0)
    html = render_report(
        finalize_audit(config={}, dataset=ds.summary(), model={}, validation=None, methods=[res])
    )
    conv = _conventions(res, "slift")
    assert fmt_number(conv.epsilon) in html and fmt_number(conv.other_epsilon) in html
    assert fmt_number(conv.epsilon) != fmt_number(conv.other_epsilon)
    assert "ε, other convention" in html
    assert "positive outcome only, Morina et al." in html
    assert "both outcomes, Foulds et al. / AIF360" in html


@pytest.mark.skipif(not COMPAS_CSV.exists(), reason="COMPAS data not available")
def test_compas_sex_race_age_slift_under_both_conventions() -> None:
    """The issue's numbers: smoothed (α = β = 0.5, AIF360's concentration 1) ε of the base
    rate P(two_year_recid = 1 | s) over sex × race × age_cat — AIF360's dataset-level
    statistical parity — is 1.589 on the positive outcome and 1.883 on both outcomes."""
    raw = pd.read_csv(
        COMPAS_CSV, usecols=["sex", "race", "age_cat", "two_year_recid", "decile_score"]
    )
    frame = raw[["sex", "race", "age_cat", "two_year_recid"]].copy()
    frame["score"] = (raw["decile_score"] >= 5).astype(float)
    roles = ColumnRoles(label="two_year_recid", protected=("sex", "race", "age_cat"), score="score")
    ds = AuditDataset.from_frame(frame, roles, threshold=0.5)
    res = run_intersectional(ds, _cfg("positive", marginals=False, metrics=["slift"]), seed=0)
    conv = _conventions(res, "slift", "sex_x_race_x_age__cat")
    # independent closed form over the non-empty intersections
    g = frame.groupby(["sex", "race", "age_cat"], observed=True)["two_year_recid"].agg(
        ["sum", "size"]
    )
    r = (g["sum"].to_numpy() + 0.5) / (g["size"].to_numpy() + 1.0)
    pos = math.log(r.max() / r.min())
    both = max(pos, math.log((1 - r).max() / (1 - r).min()))
    assert conv.epsilon == pytest.approx(pos, abs=1e-12)
    assert conv.other_epsilon == pytest.approx(both, abs=1e-12)
    assert (round(conv.epsilon, 3), round(conv.other_epsilon, 3)) == (1.589, 1.883)
