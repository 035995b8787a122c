"""Paired model comparison (:mod:`fairengine.comparison`): closed forms, the cell-multinomial
bootstrap against a row-index bootstrap, degenerate groups, Monte-Carlo resolution, the JSON
round trip and bad inputs. Calibration by simulation is in ``test_comparison_calibration.py``."""

from __future__ import annotations

import json
import math
from itertools import combinations

import numpy as np
import pytest

from fairengine.comparison import (
    ComparisonInputError,
    ComparisonResampling,
    ComparisonResult,
    _bounds,
    _cells,
    compare_models,
)
from fairengine.dataset import GroupEncoding
from fairengine.results import gap_question


def _data(n: int = 3000, seed: int = 0, flip: float = 0.08):
    rng = np.random.default_rng(seed)
    race = rng.integers(0, 3, n)
    sex = rng.integers(0, 2, n)
    y = rng.binomial(1, 0.35 + 0.1 * (sex == 1), n)
    score = rng.random(n) * 0.6 + 0.25 * y + 0.05 * (race == 0)
    base = (score > 0.5).astype(int)
    cand = base.copy()
    f = rng.random(n) < flip
    cand[f] = 1 - cand[f]
    groups = {"race": (race, ["a", "b", "c"]), "sex": (sex, ["f", "m"])}
    return y, base, cand, groups


def _rate(pred, y, mask, metric):
    if metric == "tpr":
        mask = mask & (y == 1)
    elif metric == "fpr":
        mask = mask & (y == 0)
    return pred[mask].mean()


def test_gaps_and_difference_equal_direct_numpy() -> None:
    y, base, cand, groups = _data()
    res = compare_models(y, base, cand, groups)
    expected = []
    for attr, (codes, cats) in groups.items():
        for a, b in combinations(range(len(cats)), 2):
            for metric in ("selection_rate", "tpr", "fpr"):
                gb = _rate(base, y, codes == a, metric) - _rate(base, y, codes == b, metric)
                gc = _rate(cand, y, codes == a, metric) - _rate(cand, y, codes == b, metric)
                expected.append((attr, cats[a], cats[b], metric, gb, gc))
    assert len(res.questions) == len(expected) == 12
    for q, (attr, ga, gb_name, metric, gb, gc) in zip(res.questions, expected, strict=True):
        assert (q.attribute, q.group_a, q.group_b, q.metric) == (attr, ga, gb_name, metric)
        canonical = "positive_rate" if metric == "selection_rate" else metric
        assert q.question == gap_question(canonical, attr, ga, gb_name)
        assert q.gap_baseline == pytest.approx(gb, abs=1e-12)
        assert q.gap_candidate == pytest.approx(gc, abs=1e-12)
        assert q.difference == pytest.approx(abs(gc) - abs(gb), abs=1e-12)
        assert q.low <= q.difference <= q.high
        # the decision flags agree with the bounds and with the p-values
        if q.not_worse is not None:
            assert q.not_worse == (q.high < res.delta) == (q.pvalue_not_worse <= res.alpha)
        if q.worse is not None:
            assert q.worse == (q.low > 0) == (q.pvalue_worse <= res.alpha)
    codes = groups["sex"][0]
    q = res.question("tpr", "sex", "f", "m")
    assert (q.n_a, q.n_b) == (
        int(((codes == 0) & (y == 1)).sum()),
        int(((codes == 1) & (y == 1)).sum()),
    )


def test_probabilities_with_threshold_use_the_audits_rule() -> None:
    y, _, _, groups = _data(n=1000)
    rng = np.random.default_rng(3)
    pb = rng.random(y.size)
    pc = np.clip(pb + rng.normal(0, 0.05, y.size), 0, 1)
    res = compare_models(y, pb, pc, groups, threshold=0.5, metrics=["selection_rate"])
    hard = compare_models(
        y, (pb > 0.5).astype(int), (pc > 0.5).astype(int), groups, metrics=["selection_rate"]
    )
    assert [q.gap_candidate for q in res.questions] == [q.gap_candidate for q in hard.questions]


def test_identical_models_give_zero_difference_and_a_tight_interval() -> None:
    y, base, _, groups = _data()
    res = compare_models(y, base, base.copy(), groups)
    for q in res.questions:
        assert q.difference == 0.0
        # c_{+,+} = g_c − g_b ≡ 0 in every resample, so the triangle bound |Δ| ≤ |g_c − g_b|
        # pins the interval at 0 whatever the size of the gap
        assert q.low == 0.0 and q.high == 0.0
        assert q.not_worse is True and q.worse is False and q.decision == "not_worse"
    table = _cells.CellTable.from_rows(y, base, base, [groups["race"][0]], [3])
    qs = [_cells.Question(0, "race", 0, 1, "tpr")]
    draws = _cells.contrast_draws(table, qs, np.random.default_rng(0), 500)
    assert np.all(draws[:, 0] == 0.0) and np.all(draws[:, 3] == 0.0)  # c_{+,+}, c_{−,−}
    assert draws[:, 1].std() > 0.01  # c_{+,−} = g_c + g_b carries the gaps' own noise


def test_pairing_narrows_the_interval_for_nearly_identical_models() -> None:
    """Models that differ on 1 % of rows: the interval is about ±q·se(g_c − g_b), several
    times narrower than ±q·√2·se(g) of two independent models' gaps."""
    y, base, cand, groups = _data(flip=0.01)
    res = compare_models(y, base, cand, groups, metrics=["selection_rate"])
    q = res.question("selection_rate", "sex", "f", "m")
    se_gap = math.sqrt(2 * 0.25 / (y.size / 2))  # binomial SD of one model's gap, at most
    unpaired_width = 2 * res.diagnostics.quantile * math.sqrt(2) * se_gap
    assert q.high - q.low < 0.2 * unpaired_width
    assert q.not_worse is True


def _row_bootstrap_contrasts(y, base, cand, codes, n_groups, questions, rng, n_draws):
    """Naive paired bootstrap: resample row indices, tabulate, compute the contrasts."""
    n = y.size
    out = np.empty((n_draws, 4 * len(questions)))
    for i in range(n_draws):
        idx = rng.integers(0, n, n)
        t = _cells.CellTable.from_rows(
            y[idx], base[idx], cand[idx], [c[idx] for c in codes], n_groups
        )
        gb, gc = _cells.gaps(t, t.counts[None, :], questions)
        out[i] = _cells.contrasts(gb, gc)[0]
    return out


def test_cell_multinomial_bootstrap_matches_row_index_bootstrap() -> None:
    """A row bootstrap only changes the cell counts, which are Multinomial(n, N_c/n): the two
    draws have the same distribution (checked on the mean and SD of every contrast, within
    Monte-Carlo error, and on the maxT quantile)."""
    y, base, cand, groups = _data(n=240, seed=5, flip=0.15)
    codes = [groups["race"][0], groups["sex"][0]]
    table = _cells.CellTable.from_rows(y, base, cand, codes, [3, 2])
    qs = [
        _cells.Question(k, name, a, b, m)
        for k, (name, g) in enumerate([("race", 3), ("sex", 2)])
        for a, b in combinations(range(g), 2)
        for m in ("selection_rate", "tpr", "fpr")
    ]
    n_draws = 3000
    cell = _cells.contrast_draws(table, qs, np.random.default_rng(1), n_draws)
    row = _row_bootstrap_contrasts(
        y, base, cand, codes, [3, 2], qs, np.random.default_rng(2), n_draws
    )
    cell = cell[np.isfinite(cell).all(axis=1)]
    row = row[np.isfinite(row).all(axis=1)]
    assert cell.shape[0] > 0.99 * n_draws and row.shape[0] > 0.99 * n_draws
    m1, m2 = cell.mean(axis=0), row.mean(axis=0)
    s1, s2 = cell.std(axis=0, ddof=1), row.std(axis=0, ddof=1)
    z_mean = (m1 - m2) / np.sqrt(s1**2 / cell.shape[0] + s2**2 / row.shape[0])
    # SD of a sample SD ≈ s·√((κ − 1)/(4B)); κ ≈ 3 here, so the ratio's SD ≈ √(2·2/(4B))
    z_sd = np.log(s1 / s2) / math.sqrt(1.0 / cell.shape[0] + 1.0 / row.shape[0])
    k = cell.shape[1]
    bound = 3.5  # ~ Bonferroni 1 % over the 48 columns
    assert k == 48
    assert np.max(np.abs(z_mean)) < bound, z_mean
    assert np.max(np.abs(z_sd)) < bound * 1.2, z_sd
    observed = _cells.contrasts(*_cells.gaps(table, table.counts[None, :], qs))[0]
    q_cell = _bounds.band(cell, observed, 0.05, 1e-3).q
    q_row = _bounds.band(row, observed, 0.05, 1e-3).q
    assert abs(q_cell / q_row - 1) < 0.05, (q_cell, q_row)


def test_group_without_positives_leaves_its_tpr_untested() -> None:
    y, base, cand, groups = _data(n=2000)
    race = groups["race"][0]
    y = y.copy()
    y[race == 2] = 0  # group c: no positives → TPR undefined; FPR and selection rate fine
    res = compare_models(y, base, cand, {"race": groups["race"]})
    for q in res.questions:
        involves_c = "c" in (q.group_a, q.group_b)
        if q.metric == "tpr" and involves_c:
            assert q.decision == "not_tested" and q.not_worse is None and q.worse is None
            assert "'c'" in (q.reason or "") and "positives" in (q.reason or "")
            assert math.isnan(q.low) and math.isnan(q.pvalue_not_worse)
        else:
            assert q.decision != "not_tested" and q.reason is None
    assert any("not tested" in w for w in res.warnings)
    # round trip with NaN fields
    back = ComparisonResult.from_dict(json.loads(json.dumps(res.to_dict(), allow_nan=False)))
    assert back.to_dict() == res.to_dict()


def test_group_without_negatives_leaves_its_fpr_untested() -> None:
    y, base, cand, groups = _data(n=2000)
    sex = groups["sex"][0]
    y = np.where(sex == 0, 1, y)
    res = compare_models(y, base, cand, {"sex": groups["sex"]})
    assert res.question("fpr", "sex", "f", "m").decision == "not_tested"
    assert res.question("tpr", "sex", "f", "m").decision != "not_tested"


def test_all_untested_runs_no_bootstrap() -> None:
    y, base, cand, groups = _data(n=500)
    y = np.zeros_like(y)
    res = compare_models(y, base, cand, {"sex": groups["sex"]}, metrics=["tpr"])
    assert [q.decision for q in res.questions] == ["not_tested"]
    assert res.n_resamples == 0 and math.isnan(res.diagnostics.quantile)


def test_resamples_with_an_undefined_rate_are_left_out_and_counted() -> None:
    """A group with a single positive: about e^{-1} of the resamples miss it, and its TPR is
    undefined there; those resamples are dropped (conditional bootstrap) and warned about."""
    y, base, cand, groups = _data(n=2000)
    race = groups["race"][0]
    y = y.copy()
    pos_c = np.flatnonzero((race == 2) & (y == 1))
    y[pos_c[1:]] = 0
    settings = ComparisonResampling(first=999, max_resamples=999)
    res = compare_models(
        y, base, cand, {"race": groups["race"]}, metrics=["tpr"], resampling=settings
    )
    d = res.diagnostics
    assert d.n_drawn == 999 and d.n_resamples == d.n_drawn - d.n_undefined
    assert 0.25 < d.n_undefined / d.n_drawn < 0.5
    assert any("zero denominator" in w for w in res.warnings)
    assert res.question("tpr", "race", "a", "c").n_b == 1


def test_decision_within_monte_carlo_error_is_reported_as_such() -> None:
    """δ set exactly at the upper bound U: the decision U < δ is within Monte-Carlo error, so it
    is "undetermined (Monte-Carlo resolution)" with the number of resamples, not "no
    evidence"; with growth, B grows before giving up."""
    y, base, cand, groups = _data(n=3000)
    fixed = ComparisonResampling(first=999, max_resamples=999)
    first = compare_models(
        y, base, cand, {"sex": groups["sex"]}, metrics=["selection_rate"], resampling=fixed, seed=4
    )
    u = first.questions[0].high
    assert 0 < u < 1
    res = compare_models(
        y,
        base,
        cand,
        {"sex": groups["sex"]},
        metrics=["selection_rate"],
        resampling=fixed,
        seed=4,
        delta=u,
    )
    q = res.questions[0]
    assert q.high == u and q.not_worse is None
    assert q.decision == "undetermined (Monte-Carlo resolution)"
    assert "999 resamples" in q.reading
    assert any("Monte-Carlo resolution" in w for w in res.warnings)
    grown = compare_models(
        y,
        base,
        cand,
        {"sex": groups["sex"]},
        metrics=["selection_rate"],
        resampling=ComparisonResampling(first=999, max_resamples=7999),
        seed=4,
        delta=u,
    )
    assert grown.diagnostics.looks[0] == 999 and len(grown.diagnostics.looks) > 1
    assert grown.diagnostics.quantile_low <= grown.diagnostics.quantile
    assert grown.diagnostics.quantile <= grown.diagnostics.quantile_high


def test_result_round_trips_through_the_codec_and_group_encodings_are_accepted() -> None:
    y, base, cand, groups = _data(n=1500)
    encs = {
        name: GroupEncoding(name, codes.astype(np.uint8), tuple(cats))
        for name, (codes, cats) in groups.items()
    }
    res = compare_models(y, base, cand, encs, seed=7)
    assert res == compare_models(y, base, cand, groups, seed=7)
    text = json.dumps(res.to_dict(), allow_nan=False)
    back = ComparisonResult.from_dict(json.loads(text))
    assert back == res and back.to_dict() == res.to_dict()
    assert back.diagnostics.resampling == ComparisonResampling()
    assert "Romano & Wolf" in res.confidence_method


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda a: a | {"baseline": a["baseline"][:-1]}, "baseline"),
        (lambda a: a | {"candidate": a["candidate"][:-1]}, "candidate"),
        (lambda a: a | {"label": np.where(a["label"] == 1, 2, 0)}, "label"),
        (lambda a: a | {"label": a["label"].astype(float) * 0.5}, "label"),
        (lambda a: a | {"baseline": a["baseline"] * 0.7}, "baseline"),
        (
            lambda a: a | {"groups": {"sex": (np.zeros(a["label"].size, int), ["f", "m"])}},
            "groups['sex']",
        ),
        (
            lambda a: a | {"groups": {"sex": (np.zeros(a["label"].size, int), ["f"])}},
            "groups['sex']",
        ),
        (
            lambda a: a | {"groups": {"sex": (a["groups"]["sex"][0][:-1], ["f", "m"])}},
            "groups['sex']",
        ),
        (lambda a: a | {"groups": {"sex": (a["groups"]["sex"][0], ["f"])}}, "groups['sex']"),
        (lambda a: a | {"groups": {}}, "groups"),
        (lambda a: a | {"delta": -0.01}, "delta"),
        (lambda a: a | {"delta": math.nan}, "delta"),
        (lambda a: a | {"alpha": 1.5}, "alpha"),
        (lambda a: a | {"metrics": ["auc"]}, "metrics"),
        (lambda a: a | {"metrics": []}, "metrics"),
        (lambda a: a | {"threshold": 2.0}, "threshold"),
        (lambda a: a | {"seed": 1.5}, "seed"),
    ],
)
def test_bad_inputs_name_the_parameter(change, needle) -> None:
    y, base, cand, groups = _data(n=300)
    args = {"label": y, "baseline": base, "candidate": cand, "groups": groups}
    args = change(args)
    kwargs = {
        k: v for k, v in args.items() if k not in ("label", "baseline", "candidate", "groups")
    }
    with pytest.raises(ComparisonInputError) as info:
        compare_models(args["label"], args["baseline"], args["candidate"], args["groups"], **kwargs)
    assert needle in str(info.value)


def test_bad_resampling_settings_name_the_setting() -> None:
    with pytest.raises(ComparisonInputError, match=r"resampling\.first"):
        ComparisonResampling(first=10)
    with pytest.raises(ComparisonInputError, match=r"resampling\.max_resamples"):
        ComparisonResampling(first=999, max_resamples=500)
    with pytest.raises(ComparisonInputError, match=r"resampling\.growth"):
        ComparisonResampling(growth=1.0)
    assert ComparisonResampling().schedule() == (1999, 5997, 13993, 29985, 31999)
