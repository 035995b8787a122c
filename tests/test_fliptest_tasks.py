"""FlipTest for regression models and multiclass classifiers (issue 22;
``fairengine/fliptest/outcomes.py``): closed forms of the flip rules under a known shift map,
the type-I error of the flipset test under a known null and its power under a planted
dependence (simulations), the configuration errors, and the method on the proxy-shift examples
(``fairengine.datasets.make_proxy_shift``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from fairengine.dataset import AuditDataset
from fairengine.datasets import make_proxy_shift
from fairengine.errors import ConfigError
from fairengine.fliptest import FlipTestConfig, compute_flipsets, flip_test, run_fliptest
from fairengine.fliptest.outcomes import BINARY, FlipRule, class_transitions
from fairengine.fliptest.resampler import FlipTestResampler
from fairengine.transport import LinearOTMap

W = np.array([1.0, -0.5, 2.0])


def _linear(x: np.ndarray, group: str) -> np.ndarray:
    return x @ W


def _shifted_pair(s: np.ndarray, n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A source sample and the same sample shifted by ``s``: the Gaussian OT map between them
    is exactly T(x) = x + s (equal covariances: A = I)."""
    xs = np.random.default_rng(seed).normal(size=(n, len(s)))
    return xs, xs + s


# ------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize(
    ("shift", "delta", "expected"),
    [
        # w·s = 0.4 + 0.25 + 0.2 = 0.85: every counterpart's prediction is 0.85 higher
        ([0.4, -0.5, 0.1], 0.5, "negative"),
        ([0.4, -0.5, 0.1], 0.9, "none"),
        # w·s = -0.85: every counterpart's prediction is 0.85 lower
        ([-0.4, 0.5, -0.1], 0.8, "positive"),
        ([-0.4, 0.5, -0.1], 1.0, "none"),
    ],
)
def test_a_linear_regressor_under_a_shift_map_flips_everyone_or_no_one(
    shift: list[float], delta: float, expected: str
) -> None:
    """f(x) = w·x and T(x) = x + s change every prediction by w·s: F− (counterpart higher by
    ≥ δ) is everyone when w·s ≥ δ, F+ everyone when w·s ≤ −δ, both empty when |w·s| < δ."""
    s = np.asarray(shift)
    xs, xt = _shifted_pair(s)
    rule = FlipRule("value", delta)
    fs = compute_flipsets(LinearOTMap(), xs, xt, _linear, "a", "b", rule=rule)
    np.testing.assert_allclose(fs.images, xs + s, atol=1e-8)
    np.testing.assert_allclose(fs.mapped_decision - fs.source_decision, W @ s, atol=1e-8)
    assert abs(W @ s) != pytest.approx(delta)  # no ties at the boundary
    for kind in ("positive", "negative"):
        assert fs.masks[kind].all() if kind == expected else not fs.masks[kind].any()


def test_a_regression_threshold_flips_the_decisions_as_a_binary_audit() -> None:
    """With ``threshold`` t the flipsets are the paper's for the decision f(x) > t."""
    s = np.array([0.3, 0.0, 0.2])
    xs, xt = _shifted_pair(s, seed=1)
    fs = compute_flipsets(LinearOTMap(), xs, xt, lambda x, g: _linear(x, g) > 0.5, "a", "b")
    p, m = xs @ W > 0.5, (xs + s) @ W > 0.5
    np.testing.assert_array_equal(fs.positive, p & ~m)
    np.testing.assert_array_equal(fs.negative, ~p & m)
    assert fs.negative.sum() == np.sum((xs @ W <= 0.5) & ((xs + s) @ W > 0.5)) > 0


def test_a_shift_across_a_decision_boundary_changes_exactly_the_crossing_classes() -> None:
    """Classes by x0 < 0, 0 <= x0 < 1, x0 >= 1; T(x) = x + (0.5, 0, 0) moves x0 in [-0.5, 0)
    from class 0 to 1 and x0 in [0.5, 1) from 1 to 2, nobody else."""
    s = np.array([0.5, 0.0, 0.0])
    xs, xt = _shifted_pair(s, n=500, seed=2)

    def classify(x: np.ndarray, group: str) -> np.ndarray:
        return np.digitize(x[:, 0], [0.0, 1.0])

    rule = FlipRule("class")
    fs = compute_flipsets(LinearOTMap(), xs, xt, classify, "a", "b", rule=rule)
    x0 = xs[:, 0]
    up01 = (x0 >= -0.5) & (x0 < 0)
    up12 = (x0 >= 0.5) & (x0 < 1)
    np.testing.assert_array_equal(fs.masks["changed"], up01 | up12)
    moves = class_transitions(fs.source_decision, fs.mapped_decision, 3)
    expected = np.zeros((3, 3), int)
    for i, j in ((0, 0), (0, 1), (1, 1), (1, 2), (2, 2)):
        src, dst = classify(xs, ""), classify(xs + s, "")
        expected[i, j] = np.sum((src == i) & (dst == j))
    np.testing.assert_array_equal(moves, expected)
    assert moves[0, 1] == up01.sum() > 0 and moves[1, 2] == up12.sum() > 0
    assert moves[0, 2] == moves[1, 0] == moves[2, 0] == moves[2, 1] == 0


def test_flip_rules_check_their_settings() -> None:
    with pytest.raises(ConfigError, match=r"methods\.fliptest\.delta must be a positive number"):
        FlipRule("value", None)
    with pytest.raises(ConfigError, match=r"methods\.fliptest\.delta must be a positive number"):
        FlipRule("value", 0.0)
    assert FlipRule("class").kinds == ("changed",) and BINARY.kinds == ("positive", "negative")


# ------------------------------------------------------------------------- type-I error, power
def _groups(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Two groups of ``n`` rows, 2 features; group b's second feature shifted by ``shift``
    (0: one feature distribution for both)."""
    xa = rng.normal(size=(n, 2))
    xb = rng.normal(size=(n, 2)) + np.array([0.0, shift])
    return xa, xb


def _rejection_rate(rule: FlipRule, decide, shift: float, n_sim: int, seed: int) -> np.ndarray:
    """Permutation p-values of each kind over ``n_sim`` simulated pairs (linear map, 19
    label-permutation refits, no self-map or bootstrap: the permutation test alone, exact
    under exchangeable groups)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sim):
        xa, xb = _groups(rng, 80, shift)
        res = flip_test(
            LinearOTMap(), xa, xb, decide, "a", "b", n_permutations=19, n_selfmap=0,
            n_bootstrap=0, seed=int(rng.integers(2**31)), rule=rule,
        )  # fmt: skip
        out.append([res.tests[k].pvalue_permutation for k in rule.kinds])
    return np.asarray(out)


def _regression_model(x: np.ndarray, group: str) -> np.ndarray:
    return x[:, 0] + 0.8 * x[:, 1]  # blind to the group


def _class_model(x: np.ndarray, group: str) -> np.ndarray:
    return np.digitize(x[:, 0] + 0.8 * x[:, 1], [-0.6, 0.6])  # blind to the group


@pytest.mark.parametrize(
    ("rule", "decide"),
    [(FlipRule("value", 0.25), _regression_model), (FlipRule("class"), _class_model)],
    ids=["regression", "multiclass"],
)
def test_the_flipset_test_holds_its_level_under_the_null_and_has_power(rule, decide) -> None:
    """Under the FlipTest null (groups with one feature distribution, a model blind to the
    group) the label-permutation test is exact: P(p <= 0.05) = 1/20 with 19 refits (less with
    ties). Over 160 simulated pairs the rejection rate of each flipset is at most α = 0.05 plus
    3 Monte-Carlo standard errors (SE = 0.017; 0.038-0.041 over 1,000 pairs in
    ``benchmarks/fliptest_individual_tasks.py``). With group b's second feature shifted
    by 1.5 (a proxy the model reads, changing the prediction by 1.2) the flipsets of at least
    90 % of 20 pairs are beyond every permutation refit (δ = 0.6 for regression)."""
    alpha, n_sim = 0.05, 160
    p0 = _rejection_rate(rule, decide, 0.0, n_sim, seed=11)
    se = np.sqrt(alpha * (1 - alpha) / n_sim)
    rates = (p0 <= alpha + 1e-12).mean(axis=0)
    assert np.all(rates <= alpha + 3 * se), rates
    # and not degenerate: the p-values spread over (0, 1] (mean 1/2 + 1/40 for an exact test
    # without ties; ties of the flip counts raise it: 0.56-0.60 over 1,000 pairs, benchmarks/)
    # (a broken null, all p = 1 or all at the floor, lies far outside)
    assert np.all((p0.mean(axis=0) > 0.45) & (p0.mean(axis=0) < 0.7))
    if rule.outcome == "value":  # a linear map shifts every prediction alike: the rate is
        # near 0 or 1, and a permuted split shifts the mean by ~0.16 (SD): test above that
        rule = FlipRule("value", 0.6)
    p1 = _rejection_rate(rule, decide, 1.5, 20, seed=12)
    # the planted shift raises the prediction of b's counterparts: F- (or the class change)
    kind = rule.kinds.index("negative" if "negative" in rule.kinds else "changed")
    assert (p1[:, kind] <= alpha + 1e-12).mean() >= 0.9


# ------------------------------------------------------------------------- the method
def _proxy(task: str, n: int = 1500, seed: int = 0, shift: float = 1.0):
    data = make_proxy_shift(task, n=n, seed=seed, shift=shift)
    df = data.frame
    model = (LinearRegression() if task == "regression" else LogisticRegression(max_iter=500)).fit(
        df[["x1", "x2"]], df["y"]
    )
    return AuditDataset.from_frame(df, data.roles, task=task), model


SMALL = dict(
    enabled=True, n_permutations=19, n_selfmap=19, n_bootstrap=9, max_per_group=150,
    attributes=["group"], validate=False,
)  # fmt: skip


@pytest.mark.parametrize(
    ("task", "settings", "message"),
    [
        ("regression", {}, "methods.fliptest.delta is required in a regression audit"),
        ("regression", {"delta": 0.2, "threshold": 0.0}, "not both"),
        ("regression", {"delta": 0.2, "mode": "equalized_odds"}, "mode: equalized_odds"),
        ("multiclass", {"delta": 0.2}, "delta applies to regression audits"),
        ("multiclass", {"threshold": 0.5}, "threshold does not apply to a multiclass audit"),
    ],
)
def test_settings_that_do_not_fit_the_task_are_named(task, settings, message) -> None:
    ds, model = _proxy(task, n=400)
    with pytest.raises(ConfigError, match=message):
        run_fliptest(ds, FlipTestConfig(**{**SMALL, **settings}), predict_proba=model.predict)


def test_regression_fliptest_on_the_proxy_shift_example() -> None:
    """The proxy x2 reads B lower, so the least-squares model predicts B's counterparts in A
    higher: B -> A has a large F− (prediction ≥ δ lower than the counterpart's), A -> B a large
    F+; the mean change equals the mean predictions' difference; the flipsets are rejected."""
    ds, model = _proxy("regression")
    res = run_fliptest(ds, FlipTestConfig(**SMALL, delta=0.2), predict_proba=model.predict, seed=3)
    assert res.status == "ok"
    got = {f.key: f for f in res.findings}
    assert set(got) == {
        "fliptest_pos.group.A_B", "fliptest_neg.group.A_B",
        "fliptest_pos.group.B_A", "fliptest_neg.group.B_A",
    }  # fmt: skip
    assert got["fliptest_neg.group.B_A"].estimate > 0.2
    assert got["fliptest_neg.group.B_A"].pvalue == pytest.approx(0.05)  # the floor at 19 refits
    assert got["fliptest_pos.group.B_A"].estimate < 0.05
    assert "at least 0.2 lower than their transported counterpart in A" in (
        got["fliptest_neg.group.B_A"].reading
    )
    d = res.details
    assert d.task == "regression" and d.flip == "value" and d.delta == 0.2 and d.threshold is None
    ba = d.pairs[0].directions[1]
    assert ba.source == "B" and ba.prediction_shift is not None and ba.class_flips is None
    ps = ba.prediction_shift
    assert ps.mean_change == pytest.approx(ps.mean_mapped - ps.mean_source, abs=1e-12)
    assert ps.mean_change > 0.2  # B's counterparts are predicted higher
    assert ba.source_positive is None and ba.dp_count_gap is None
    assert ba.transparency.negative.ranking_mean_difference[0] == "x2"  # the biased proxy
    assert ba.net_flips == ba.flipsets.positive.count - ba.flipsets.negative.count


def test_multiclass_fliptest_counts_the_class_changes() -> None:
    ds, model = _proxy("multiclass")
    res = run_fliptest(ds, FlipTestConfig(**SMALL), predict_proba=model.predict, seed=4)
    got = {f.key: f for f in res.findings}
    assert set(got) == {"fliptest_changed.group.A_B", "fliptest_changed.group.B_A"}
    d = res.details
    assert d.flip == "class" and d.classes == ("high", "low", "medium")
    for direction in d.pairs[0].directions:
        cf = direction.class_flips
        assert cf is not None and direction.flipsets.positive is None
        moves = np.asarray(cf.transitions)
        changed = direction.flipsets.changed
        assert changed is not None
        assert moves.sum() == direction.n_source
        assert moves.sum() - np.trace(moves) == changed.count
        assert changed.rate == pytest.approx(changed.count / direction.n_source)
        assert sum(cf.flipped_out) == sum(cf.flipped_in) == changed.count
    # B's counterparts in A are rated higher: more B -> A moves up (low -> medium -> high)
    ba = np.asarray(d.pairs[0].directions[1].class_flips.transitions)
    high, low, medium = 0, 1, 2
    assert ba[low, medium] + ba[medium, high] > ba[medium, low] + ba[high, medium]


def test_the_resampler_draws_the_new_kinds_reproducibly() -> None:
    ds, model = _proxy("multiclass", n=800)
    cfg = FlipTestConfig(**{**SMALL, "max_per_group": 100})
    res = run_fliptest(ds, cfg, predict_proba=model.predict, seed=5)
    a = FlipTestResampler(ds, cfg, res, predict_proba=model.predict, seed=5)
    b = FlipTestResampler(ds, cfg, res, predict_proba=model.predict, seed=5)
    key = "fliptest_changed.group.A_B"
    assert a.can_extend(key)
    first = a.draw(key, "permutation", 19, 10)
    assert 0 <= first <= 10 and b.draw(key, "permutation", 19, 10) == first
    assert 0 <= a.draw(key, "self-map", 19, 10) <= 10


def test_predicted_classes_outside_the_label_are_named() -> None:
    ds, model = _proxy("multiclass", n=400)

    def odd(frame: pd.DataFrame) -> np.ndarray:
        return np.where(frame["x1"].to_numpy() > 2.5, "huge", model.predict(frame))

    with pytest.raises(Exception, match=r"\['huge'\].*never takes"):
        run_fliptest(ds, FlipTestConfig(**SMALL), predict_proba=odd)


def test_the_new_details_round_trip_through_json() -> None:
    import json

    import fairengine.registry  # noqa: F401 (registers every method's details type)
    from fairengine.results import MethodResult

    for task, extra in (("regression", {"delta": 0.3}), ("multiclass", {})):
        ds, model = _proxy(task, n=600)
        res = run_fliptest(
            ds, FlipTestConfig(**{**SMALL, **extra}), predict_proba=model.predict, seed=6
        )
        text = json.dumps(res.to_dict(), allow_nan=False)  # NaN (empty flipsets) as strings
        back = MethodResult.from_dict(json.loads(text))
        assert type(back.details) is type(res.details)
        assert json.dumps(back.to_dict(), allow_nan=False) == text


def test_a_binary_threshold_is_a_probability() -> None:
    from fairengine.fliptest.config import check_task

    with pytest.raises(ConfigError, match=r"threshold must be in \[0, 1\] or null in a binary"):
        check_task(FlipTestConfig(threshold=1.5), "binary")
    check_task(FlipTestConfig(threshold=1.5), "regression")  # a threshold on the prediction
    with pytest.raises(ConfigError, match=r"methods\.fliptest\.threshold must be a number"):
        FlipTestConfig(threshold=float("nan"))


def test_multiclass_equalized_odds_maps_within_each_true_class() -> None:
    """``mode: equalized_odds`` in a multiclass audit maps within each true class (one map per
    class stratum), as the binary mode does within y = 0 and y = 1."""
    ds, model = _proxy("multiclass", n=2400)
    cfg = FlipTestConfig(**{**SMALL, "mode": "equalized_odds", "max_per_group": 500})
    res = run_fliptest(ds, cfg, predict_proba=model.predict, seed=1)
    assert res.status == "ok"
    direction = res.details.pairs[0].directions[0]
    assert [m.stratum for m in direction.maps] == ["label_0", "label_1", "label_2"]
    moves = np.asarray(direction.class_flips.transitions)
    assert moves.sum() == direction.n_source
    assert moves.sum() - np.trace(moves) == direction.flipsets.changed.count


def test_a_regression_threshold_runs_the_binary_flipsets_and_says_so() -> None:
    """``threshold`` in a regression audit: the decision f(x) > t flips as in a binary audit
    (findings ``fliptest_pos``/``fliptest_neg`` with the decisions' counts and the
    demographic-parity gap), and the readings and the report name the threshold."""
    from tasks.report.views.fliptest import view

    ds, model = _proxy("regression")
    res = run_fliptest(ds, FlipTestConfig(**SMALL, threshold=0.5), predict_proba=model.predict)
    d = res.details
    assert d.flip == "decision" and d.threshold == 0.5 and d.delta is None
    ba = d.pairs[0].directions[1]
    assert ba.prediction_shift is None and ba.source_positive is not None
    assert ba.net_flips == ba.source_positive - ba.mapped_positive
    got = {f.key: f for f in res.findings}
    assert (
        "get a prediction at most 0.5 while their transported counterpart in A gets one above"
        in (got["fliptest_neg.group.B_A"].reading)
    )
    rendered = view(res)
    assert "Flips of the decision prediction > 0.5" in rendered["flip_note"]
    assert "demographic-parity count gap" in rendered["directions"][0]["summary"]
