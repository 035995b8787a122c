"""fairengine.multiclass.permutation: type-I error of every test under exchangeable groups
(a permutation test is exact under exchangeability, Lehmann & Romano 2005 Thm 15.2.1), the
cell and row paths agree, sequential batches add up (pair_seed), studentization matches the
engine's, JSON round trip and option errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from fairengine.errors import DataContractError
from fairengine.multiclass import (
    RATE_METRICS,
    MulticlassAttribute,
    MulticlassDetails,
    PairTests,
    all_pair_tests,
    differential_fairness,
    group_class_rates,
    pair_permutation_tests,
    pair_seed,
)
from fairengine.permutation.metrics import RATIO_METRICS as ENGINE_METRICS
from fairengine.permutation.metrics import row_values, studentized_difference

CLASSES = ["x", "y", "z"]


def _null_data(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    y = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    pred = np.where(rng.random(n) < 0.6, y, rng.integers(0, 3, n))
    codes = (rng.random(n) < 0.35).astype(int)  # unequal group sizes, independent of (y, ŷ)
    return y, pred, codes


def _band(n_sets: int, alpha: float = 0.05) -> tuple[int, int]:
    """Binomial 99.9% band of the rejection count at level alpha."""
    return int(stats.binom.ppf(0.0005, n_sets, alpha)), int(stats.binom.ppf(0.9995, n_sets, alpha))


@pytest.mark.parametrize("path", ["cells", "rows_weighted", "rows_expected"])
def test_type_one_error_under_exchangeable_groups(path: str) -> None:
    """300 null data sets × 199 permutations: every test's rejection count at 0.05 lies in the
    binomial 99.9% band around 15."""
    rng = np.random.default_rng(2024)
    n_sets, n = 300, 240
    rejections: dict[str, int] = {}
    for i in range(n_sets):
        y, pred, codes = _null_data(rng, n)
        kwargs: dict[str, object] = {}
        if path == "rows_weighted":
            kwargs["weights"] = rng.choice([0.5, 1.0, 2.0], size=n)
        if path == "rows_expected":
            gam = rng.gamma(np.where(np.arange(3) == pred[:, None], 4.0, 1.0))
            pred = gam / gam.sum(axis=1, keepdims=True)
            kwargs["probabilities"] = "expected"
        pt = pair_permutation_tests(
            y,
            pred,
            codes,
            ["a", "b"],
            CLASSES,
            group_a=0,
            group_b=1,
            n_permutations=199,
            seed=i,
            **kwargs,  # type: ignore[arg-type]
        )
        assert pt.draws == ("cells" if path == "cells" else "rows")
        for t in pt.differences:
            key = f"{t.metric}.{t.class_label}"
            rejections[key] = rejections.get(key, 0) + (t.pvalue <= 0.05)
        for d in pt.distances:
            rejections[d.metric] = rejections.get(d.metric, 0) + (d.pvalue <= 0.05)
    assert len(rejections) == 3 * 3 + 3
    lo, hi = _band(n_sets)
    assert all(lo <= r <= hi for r in rejections.values()), (lo, hi, rejections)


def test_type_one_error_of_tpr_under_the_weak_null() -> None:
    """Equal TPRs but different class mixes and sizes (the groups are not exchangeable): the
    studentized TPR tests keep their level (DiCiccio et al. 2020, §3.3: asymptotically valid
    for the weak null), 300 data sets × 199 permutations, binomial 99.9% band."""
    rng = np.random.default_rng(77)
    m = np.array([[0.7, 0.2, 0.1], [0.25, 0.6, 0.15], [0.1, 0.3, 0.6]])  # P(ŷ | y), both groups
    mix = np.array([[0.6, 0.3, 0.1], [0.2, 0.3, 0.5]])
    sizes = (150, 450)
    counts = {c: 0 for c in CLASSES}
    for i in range(300):
        codes = np.repeat([0, 1], sizes)
        y = np.concatenate([rng.choice(3, size=k, p=mix[g]) for g, k in enumerate(sizes)])
        pred = (rng.random(y.size)[:, None] > np.cumsum(m[y], axis=1)).sum(axis=1)
        pt = pair_permutation_tests(
            y, pred, codes, ["a", "b"], CLASSES, group_a=0, group_b=1, metrics=["tpr"],
            distance_tests=False, n_permutations=199, seed=i,
        )  # fmt: skip
        for t in pt.differences:
            counts[t.class_label] += t.pvalue <= 0.05
    lo, hi = _band(300)
    assert all(lo <= r <= hi for r in counts.values()), (lo, hi, counts)


def _pair_data(n: int = 2000, seed: int = 5) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, n)
    y = rng.integers(0, 3, n)
    pred = np.where(rng.random(n) < 0.4 + 0.15 * codes, y, rng.integers(0, 3, n))
    return y, pred, codes


def test_cells_and_rows_agree_on_observed_statistics() -> None:
    y, pred, codes = _pair_data()
    kw = {"group_a": "g0", "group_b": "g2", "n_permutations": 499}
    cells = pair_permutation_tests(y, pred, codes, ["g0", "g1", "g2"], CLASSES, **kw)
    rows = pair_permutation_tests(
        y, pred, codes, ["g0", "g1", "g2"], CLASSES, weights=np.ones(y.size), **kw
    )
    assert (cells.draws, rows.draws) == ("cells", "rows")
    for c, r in zip(cells.differences, rows.differences, strict=True):
        assert (c.metric, c.class_label) == (r.metric, r.class_label)
        assert c.statistic == pytest.approx(r.statistic, rel=1e-10)
        assert c.difference == pytest.approx(r.difference, abs=1e-12)
        # same null, different draws: p-values agree within Monte-Carlo error
        assert abs(c.pvalue - r.pvalue) < 0.1
    for c, r in zip(cells.distances, rows.distances, strict=True):
        assert c.statistic == pytest.approx(r.statistic, rel=1e-10)


def test_studentized_statistic_is_the_engines_for_binary_one_vs_rest() -> None:
    """The multiclass TPR of class z between two groups is the engine's binary TPR on the
    one-vs-rest labels, with the engine's delta-method studentization."""
    y, pred, codes = _pair_data()
    pt = pair_permutation_tests(
        y, pred, codes, ["g0", "g1", "g2"], CLASSES, group_a=0, group_b=1, n_permutations=9
    )
    for metric in ("tpr", "fpr"):
        for c in range(3):
            yb, pb = (y == c).astype(float), (pred == c).astype(float)
            va = row_values(ENGINE_METRICS[metric], yb[codes == 0], pb[codes == 0]).sum(0)
            vb = row_values(ENGINE_METRICS[metric], yb[codes == 1], pb[codes == 1]).sum(0)
            d, se, z = studentized_difference(va, vb)
            t = pt.difference(metric, CLASSES[c])
            assert t.difference == pytest.approx(float(d), abs=1e-12)
            assert t.se == pytest.approx(float(se), rel=1e-12)
            assert t.statistic == pytest.approx(float(z), rel=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_sequential_batches_add_up(weighted: bool) -> None:
    """The audit's sequential decisions draw more with seed=pair_seed(seed, i, start): the
    observed statistics do not change and the counts add."""
    y, pred, codes = _pair_data(600)
    w = np.random.default_rng(1).uniform(0.5, 2, y.size) if weighted else None
    first = pair_permutation_tests(
        y, pred, codes, ["g0", "g1", "g2"], CLASSES, group_a=0, group_b=1, weights=w,
        n_permutations=200, seed=pair_seed(7, 0),
    )  # fmt: skip
    more = pair_permutation_tests(
        y, pred, codes, ["g0", "g1", "g2"], CLASSES, group_a=0, group_b=1, weights=w,
        n_permutations=300, seed=pair_seed(7, 0, 200),
    )  # fmt: skip
    allp = all_pair_tests(
        y, pred, codes, ["g0", "g1", "g2"], CLASSES, weights=w, n_permutations=200, seed=7
    )
    assert [p.group_a + p.group_b for p in allp] == ["g0g1", "g0g2", "g1g2"]
    assert allp[0] == first  # pair 0 draws from pair_seed(7, 0)
    for a, b in zip(first.differences, more.differences, strict=True):
        assert a.statistic == b.statistic
        total = a.n_extreme + b.n_extreme
        assert 0 <= total <= 500
    assert first.differences[0].n_permutations == 200
    assert more.differences[0].n_permutations == 300


def test_detects_a_real_gap() -> None:
    rng = np.random.default_rng(9)
    n = 3000
    codes = rng.integers(0, 2, n)
    y = rng.integers(0, 3, n)
    # group b is predicted its true class more often; group a's errors go to class z
    hit = rng.random(n) < np.where(codes == 1, 0.85, 0.55)
    pred = np.where(hit, y, np.where(codes == 1, (y + 1) % 3, 2))
    pt = pair_permutation_tests(
        y, pred, codes, ["a", "b"], CLASSES, group_a="a", group_b="b", n_permutations=999
    )
    assert pt.difference("tpr", "x").pvalue == pytest.approx(1 / 1000)
    assert pt.difference("tpr", "x").interval.high < 0
    assert pt.distance("tv").pvalue < 0.05


def test_json_round_trip_and_errors() -> None:
    y, pred, codes = _pair_data(300)
    pt = pair_permutation_tests(
        y, pred, codes, ["g0", "g1", "g2"], CLASSES, group_a=0, group_b=2, n_permutations=99,
        alternative="greater", studentize="none", metrics=["tpr"],
    )  # fmt: skip
    assert {t.metric for t in pt.differences} == {"tpr"}
    text = json.dumps(pt.to_dict(), allow_nan=False)
    assert PairTests.from_dict(json.loads(text)) == pt
    base = {"group_a": 0, "group_b": 1}
    with pytest.raises(DataContractError, match="group_a and group_b must differ"):
        pair_permutation_tests(y, pred, codes, ["g0", "g1", "g2"], CLASSES, group_a=1, group_b=1)
    with pytest.raises(DataContractError, match="group_b must be a category"):
        pair_permutation_tests(y, pred, codes, ["g0", "g1", "g2"], CLASSES, group_a=0, group_b=9)
    with pytest.raises(DataContractError, match="unknown metric"):
        pair_permutation_tests(y, pred, codes, ["g0", "g1", "g2"], CLASSES, metrics=["auc"], **base)
    with pytest.raises(DataContractError, match="n_permutations"):
        pair_permutation_tests(
            y, pred, codes, ["g0", "g1", "g2"], CLASSES, n_permutations=0, **base
        )


def test_explicit_pairs_streams_and_details_round_trip() -> None:
    """An audit that caps its pairs passes them with its running stream count; the typed
    details (rates, pairs, ε) round-trip through strict JSON."""
    y, pred, codes = _pair_data(600)
    cats = ["g0", "g1", "g2"]
    sub = all_pair_tests(
        y, pred, codes, cats, CLASSES, n_permutations=50, seed=3, pairs=[("g2", "g0")],
        first_stream=4, attribute="race",
    )  # fmt: skip
    one = pair_permutation_tests(
        y, pred, codes, cats, CLASSES, group_a="g2", group_b="g0", n_permutations=50,
        seed=pair_seed(3, 4), attribute="race",
    )  # fmt: skip
    assert sub == (one,)
    with pytest.raises(DataContractError, match="with itself"):
        all_pair_tests(y, pred, codes, cats, CLASSES, pairs=[(0, "g0")])
    rates = group_class_rates(y, pred, codes, cats, CLASSES, attribute="race")
    eps = differential_fairness(y, pred, codes, cats, CLASSES, attribute="race", n_draws=200)
    details = MulticlassDetails(
        (MulticlassAttribute("race", rates, sub, 1, 3, eps),),
        tuple(CLASSES),
        "argmax",
        50,
        0.95,
        RATE_METRICS,
    )
    d = details.to_dict()
    back = MulticlassDetails.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert isinstance(back, MulticlassDetails) and back.to_dict() == d
    assert back.attributes[0].pairs == sub
