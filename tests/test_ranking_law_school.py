"""A real ranking: the 21,791 law school applicants (/work/shared/data/law_school, Kusner et al.
2017's copy of the LSAC bar passage study) ranked by a linear model's predicted first-year
average ZFYA from LSAT and UGPA (least squares with intercept), audited by race: shares of the
top 10 % / 20 %, skew@k, exposure and the within-list permutation tests of Black vs White.

The model's 1,212 distinct predictions tie a lot; ties are broken by row order (ties="order").
At the top-10 % cutoff (2,180 items) 12 items share the boundary score, at 20 % (4,359) 102;
re-breaking the ties at random moves the counts below by at most 4 items (20 %: White 4,027–
4,031, Asian 183–186; the 10 % counts and Black's do not move).

Numbers (shares of the top k; expected share = the group's share of all applicants):

    race      items   top 10%        exp. share  skew@10%  top 20%        skew@20%  exposure
    White     18,285  2,032 (93.2%)  83.9%       +0.105    4,028 (92.4%)  +0.096    0.07935
    Black      1,282      4 (0.18%)   5.9%       -3.468       13 (0.30%)  -2.982    0.07101
    Asian        845     93 (4.3%)    3.9%       +0.095      184 (4.2%)   +0.085    0.07843
    Hispanic     488     16 (0.73%)   2.2%       -1.116       52 (1.2%)   -0.630    0.07463

Black − White: exposure −0.00835 (ratio 0.895; Z = −57.4), top-10 % rate 0.31 % vs 11.1 %
(Z = −38.6), top-20 % rate 1.0 % vs 22.0 % (Z = −50.6); no permuted statistic as extreme in
9,999 permutations (p = 1e-4, 2.6 s). NDKL 0.047.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fairengine.finding_keys import check_unique_keys
from fairengine.ranking import pair_permutation_tests, ranking_findings, ranking_statistics

DATA = Path("/work/shared/data/law_school/law_data.csv.gz")

pytestmark = pytest.mark.skipif(not DATA.exists(), reason="law school data not on this machine")


@pytest.fixture(scope="module")
def ranked():
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(DATA, index_col=0)
    x = np.c_[np.ones(len(df)), df["LSAT"], df["UGPA"]]
    beta = np.linalg.lstsq(x, df["ZFYA"].to_numpy(), rcond=None)[0]
    cats = sorted(df["race"].unique())
    codes = pd.Categorical(df["race"], categories=cats).codes
    return x @ beta, codes, cats


def test_top_shares_and_exposure_by_race(ranked) -> None:
    pred, codes, cats = ranked
    res = ranking_statistics(pred, codes, cats, k=(0.1, 0.2), n_permutations=0, attribute="race")
    top10, top20 = res.topk
    assert (top10.n_top, top20.n_top) == (2180, 4359)
    counts10 = {g.group: g.n_top for g in top10.groups}
    counts20 = {g.group: g.n_top for g in top20.groups}
    assert counts10 == {
        "Amerindian": 0,
        "Asian": 93,
        "Black": 4,
        "Hispanic": 16,
        "Mexican": 9,
        "Other": 25,
        "Puertorican": 1,
        "White": 2032,
    }
    assert (counts20["Black"], counts20["White"], counts20["Asian"]) == (13, 4028, 184)
    assert top10.group("Black").share_expected == pytest.approx(1282 / 21791, abs=1e-12)
    assert top10.group("Black").skew == pytest.approx(-3.468, abs=1e-3)
    assert top20.group("Black").skew == pytest.approx(-2.982, abs=1e-3)
    assert top10.group("White").skew == pytest.approx(0.105, abs=1e-3)
    assert top10.min_group == "Amerindian" and top10.min_skew == -np.inf
    assert top10.max_group == "White"
    assert res.exposure.group("Black").mean_exposure == pytest.approx(0.071008, abs=1e-6)
    assert res.exposure.group("White").mean_exposure == pytest.approx(0.079355, abs=1e-6)
    assert res.exposure.pair("Black", "White").ratio == pytest.approx(0.8948, abs=1e-4)
    assert res.ndkl.value == pytest.approx(0.04705, abs=1e-5)


def test_black_white_permutation_tests(ranked) -> None:
    pred, codes, cats = ranked
    pair = pair_permutation_tests(
        pred, codes, cats, group_a="Black", group_b="White", n_permutations=199, attribute="race"
    )
    assert pair.n_a == 1282 and pair.n_b == 18285
    for name, diff in (("exposure", -0.0083465), ("topk_10pct", -0.1080), ("topk_20pct", -0.2101)):
        t = pair.test(name)
        assert t.difference == pytest.approx(diff, abs=1e-4)
        assert t.n_extreme == 0 and t.pvalue == pytest.approx(1 / 200)
        assert t.interval.high < 0
    res = ranking_statistics(pred, codes, cats, n_permutations=0, attribute="race")
    findings = ranking_findings(res.exposure, res.topk, res.ndkl, (), (pair,))
    check_unique_keys(findings)
    f = next(f for f in findings if f.key == "rank_exposure.race.Black_White")
    assert f.tested and f.pvalue == pytest.approx(1 / 200)
    share = next(f for f in findings if f.key == "rank_topk_share_10pct.race.Black")
    assert "0.2% of the top 10% (4 of 2,180 items) against 5.9% expected" in share.reading
