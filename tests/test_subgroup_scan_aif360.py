"""Cross-check of the subgroup scan's MDSS parts against AIF360 0.6.1's ``bias_scan`` (Zhang &
Neill 2016) on ProPublica's COMPAS two-year recidivism data (Broward County; the ProPublica
filters, 6,172 rows). The model is the decile score's calibration table, p = P(recid | decile);
the scanned features are sex, race, age category, charge degree and priors (quantile bins).

* AIF360's returned subgroup scored by our :func:`bernoulli_score` equals AIF360's score within
  its rounding (4 decimals);
* our exact-LTSS coordinate ascent (:func:`mdss_scan`) finds a score at least AIF360's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.subgroup_scan import bernoulli_score, code_features
from fairengine.subgroup_scan.mdss import mdss_scan

FEATURES = ["sex", "race", "age_cat", "c_charge_degree", "priors_count"]


@pytest.fixture(scope="module")
def compas(shared_dir: Path) -> pd.DataFrame:
    df = pd.read_csv(shared_dir / "data" / "compas" / "compas-scores-two-years.csv.gz")
    keep = (
        df.days_b_screening_arrest.between(-30, 30)
        & (df.is_recid != -1)
        & (df.c_charge_degree != "O")
        & (df.score_text != "N/A")
    )
    return df[keep].reset_index(drop=True)


@pytest.mark.parametrize("overpredicted", [True, False])
def test_our_bernoulli_score_and_mdss_match_aif360_bias_scan(
    compas: pd.DataFrame, overpredicted: bool
) -> None:
    from aif360.detectors.mdss_detector import bias_scan

    assert len(compas) == 6172
    y = compas.two_year_recid.to_numpy(float)
    p = compas.groupby("decile_score").two_year_recid.transform("mean").to_numpy(float)
    coded = code_features(compas, FEATURES, levels=6)
    frame = pd.DataFrame(coded.codes, columns=FEATURES)
    subset, aif_score = bias_scan(
        frame, pd.Series(y), pd.Series(p), overpredicted=overpredicted, num_iters=10, penalty=1e-17
    )
    rows = np.ones(len(frame), dtype=bool)
    for name, values in subset.items():
        rows &= frame[name].isin(values).to_numpy()
    direction = "negative" if overpredicted else "positive"
    ours = bernoulli_score(y[rows].sum(), p[rows], direction)
    assert aif_score > 10  # COMPAS has strongly mis-calibrated subgroups in both directions
    assert ours.score == pytest.approx(aif_score, abs=5e-5 + 1e-12)
    best = mdss_scan(coded, y, p, direction, restarts=10, seed=0)
    assert best.score >= aif_score - 5e-5
    mask = np.ones(len(frame), dtype=bool)
    for f, values in best.values:
        mask &= np.isin(coded.codes[:, f], values)
    assert best.size == mask.sum()
    assert bernoulli_score(y[mask].sum(), p[mask], direction).score == pytest.approx(best.score)
