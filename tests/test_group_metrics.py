"""run_group_metrics (LiFT suite) end to end: fairlearn MetricFrame and AIF360 on Adult,
ProPublica's COMPAS error rates, intersections, LiFT compatibility, bad input, the contract."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import (
    MetricFrame,
    false_negative_rate,
    false_positive_rate,
    selection_rate,
    true_negative_rate,
    true_positive_rate,
)
from scipy.special import expit
from sklearn.metrics import accuracy_score, precision_score, roc_auc_score

from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset, GroupEncoding
from fairengine.errors import ConfigError, DataContractError
from fairengine.group_metrics import GroupMetricsConfig, run_group_metrics
from fairengine.group_metrics.result import (
    AucEstimate,
    EncodingMetrics,
    GroupMetricsDetails,
    ListedBenefit,
    MetricsGroup,
)
from fairengine.group_table import GroupTable
from fairengine.intersection import intersect_groups
from fairengine.results import MethodResult
from fairengine.roles import ColumnRoles

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    from fairengine.datasets import load_adult

    df = load_adult(DATA / "adult").frame
    z = (
        0.35 * (df["education_num"] - 10)
        + 0.03 * (df["age"] - 38)
        + 0.0004 * df["capital_gain"]
        + 0.03 * (df["hours_per_week"] - 40)
        + 0.8 * (df["relationship"] == "Husband").astype(float)
        - 1.2
    )
    out = df[["sex", "race", "income_gt_50k", "fnlwgt"]].copy()
    out["score"] = np.round(expit(z), 4)  # rounding gives ties
    return out


@pytest.fixture(scope="module")
def compas() -> pd.DataFrame:
    df = pd.read_csv(DATA / "compas" / "compas-scores-two-years.csv.gz")
    out = df[["race", "sex", "two_year_recid", "score_text", "decile_score"]].copy()
    out["high"] = out["score_text"].isin(["Medium", "High"]).astype(float)
    return out


def adult_ds(df, threshold=0.5, weight=None) -> AuditDataset:
    roles = ColumnRoles("income_gt_50k", ("sex", "race"), score="score", weight=weight)
    return AuditDataset.from_frame(df, roles, threshold=threshold)


def encoding(res: MethodResult, name: str) -> EncodingMetrics:
    assert isinstance(res.details, GroupMetricsDetails)
    return res.details.encodings[name]


def group_entry(res: MethodResult, enc: str, group: str) -> MetricsGroup:
    return next(g for g in encoding(res, enc).groups if g.group == group)


def finding(res, key: str):
    return next(f for f in res.findings if f.key == key)


# ------------------------------------------------------------------ cross-checks on Adult
@pytest.mark.slow
@pytest.mark.parametrize("weighted", [False, True])
def test_adult_rates_match_fairlearn_metricframe(adult, weighted: bool) -> None:
    ds = adult_ds(adult, weight="fnlwgt" if weighted else None)
    res = run_group_metrics(ds, GroupMetricsConfig())
    y = adult["income_gt_50k"]
    yhat = (adult["score"] > 0.5).astype(int)
    metrics = {
        "sr": selection_rate,
        "tpr": true_positive_rate,
        "fpr": false_positive_rate,
        "fnr": false_negative_rate,
        "tnr": true_negative_rate,
        "acc": accuracy_score,
        "prec": precision_score,
    }
    sp = {"sample_weight": adult["fnlwgt"].to_numpy()} if weighted else None
    for sens, enc in (("sex", "sex"), ("race", "race"), (["sex", "race"], "sex & race")):
        mf = MetricFrame(
            metrics=metrics,
            y_true=y,
            y_pred=yhat,
            sensitive_features=adult[sens],
            sample_params={k: sp for k in metrics} if weighted else None,
        )
        for g in encoding(res, enc).groups:
            key = tuple(g.group.split(" & ")) if enc == "sex & race" else g.group
            fl = mf.by_group.loc[key]
            perf = g.performance
            assert g.positive_rate.estimate == pytest.approx(fl["sr"], abs=1e-12)
            assert perf["RECALL"].estimate == pytest.approx(fl["tpr"], abs=1e-12)
            assert perf["FPR"].estimate == pytest.approx(fl["fpr"], abs=1e-12)
            assert perf["FNR"].estimate == pytest.approx(fl["fnr"], abs=1e-12)
            assert perf["TNR"].estimate == pytest.approx(fl["tnr"], abs=1e-12)
            assert perf["ACCURACY"].estimate == pytest.approx(fl["acc"], abs=1e-12)
            if np.isfinite(perf["PRECISION"].estimate):
                assert perf["PRECISION"].estimate == pytest.approx(fl["prec"], abs=1e-12)
        tok = "sex_x_race" if enc == "sex & race" else enc  # intersection_token, as in df_eps
        diff = mf.difference()
        assert finding(res, f"dp_gap_max.{tok}").estimate == pytest.approx(diff["sr"])
        assert finding(res, f"tpr_gap_max.{tok}").estimate == pytest.approx(diff["tpr"])
        assert finding(res, f"fpr_gap_max.{tok}").estimate == pytest.approx(diff["fpr"])
        assert finding(res, f"dp_impact.{tok}").estimate == pytest.approx(mf.ratio()["sr"])


def test_adult_auc_per_group_matches_sklearn(adult) -> None:
    res = run_group_metrics(adult_ds(adult, threshold=None), GroupMetricsConfig())
    for sex in ("Female", "Male"):
        sel = adult["sex"] == sex
        exact = roc_auc_score(adult.loc[sel, "income_gt_50k"], adult.loc[sel, "score"])
        f = finding(res, f"auc.sex.{sex}")
        assert f.estimate == pytest.approx(exact, abs=1e-12)
        assert f.interval.low < f.estimate < f.interval.high
    for cell in encoding(res, "sex & race").groups:
        sex, race = cell.group.split(" & ")
        sel = (adult["sex"] == sex) & (adult["race"] == race)
        exact = roc_auc_score(adult.loc[sel, "income_gt_50k"], adult.loc[sel, "score"])
        assert cell.performance["AUC"].estimate == pytest.approx(exact, abs=1e-12)
    # the binned AUC stays within its reported bound
    res_b = run_group_metrics(adult_ds(adult, threshold=None), GroupMetricsConfig(auc_bins=512))
    for g in encoding(res_b, "race").groups:
        sel = adult["race"] == g.group
        exact = roc_auc_score(adult.loc[sel, "income_gt_50k"], adult.loc[sel, "score"])
        auc = g.performance["AUC"]
        assert isinstance(auc, AucEstimate)
        assert abs(auc.estimate - exact) <= auc.error_bound + 1e-15


def test_adult_expected_counts_are_mean_probabilities(adult) -> None:
    res = run_group_metrics(adult_ds(adult, threshold=None), GroupMetricsConfig())
    fem = adult[adult["sex"] == "Female"]
    g = group_entry(res, "sex", "Female")
    assert g.positive_rate.estimate == pytest.approx(fem["score"].mean())
    pos = fem[fem["income_gt_50k"] == 1]
    assert g.performance["RECALL"].estimate == pytest.approx(pos["score"].mean())
    s, y = fem["score"], fem["income_gt_50k"]
    assert g.performance["PRECISION"].estimate == pytest.approx((s * y).sum() / s.sum())


@pytest.mark.slow
def test_adult_matches_aif360_where_definitions_coincide(adult) -> None:
    aif = pytest.importorskip("aif360.sklearn.metrics", reason="aif360 (dev extra) not installed")
    res = run_group_metrics(adult_ds(adult), GroupMetricsConfig())
    y = adult.set_index("sex")["income_gt_50k"]
    yhat = pd.Series((adult["score"] > 0.5).astype(int).to_numpy(), index=y.index)
    pairs = encoding(res, "sex").pairs
    dp = pairs.positive_rate[0]  # Female − Male, Male privileged
    assert (dp.a, dp.b) == ("Female", "Male")
    kw = {"prot_attr": "sex", "priv_group": "Male", "pos_label": 1}
    assert dp.gap == pytest.approx(aif.statistical_parity_difference(y, yhat, **kw))
    assert dp.ratio == pytest.approx(aif.disparate_impact_ratio(y, yhat, **kw))
    tpr = pairs.tpr[0]
    assert tpr.gap == pytest.approx(aif.equal_opportunity_difference(y, yhat, **kw))
    fpr = pairs.fpr[0]
    assert (tpr.gap + fpr.gap) / 2 == pytest.approx(aif.average_odds_difference(y, yhat, **kw))


# ------------------------------------------------------------------ COMPAS (ProPublica)
def test_compas_reproduces_propublica_error_rates(compas) -> None:
    """ProPublica, "How We Analyzed the COMPAS Recidivism Algorithm" (2016): Medium/High as
    positive, two_year_recid as label, all 7,214 rows: FPR 44.85 % (Black) vs 23.45 % (White),
    FNR 27.99 % vs 47.72 %."""
    assert len(compas) == 7214
    ds = AuditDataset.from_frame(
        compas, ColumnRoles("two_year_recid", ("race", "sex"), score="high"), threshold=0.5
    )
    res = run_group_metrics(ds, GroupMetricsConfig())
    black = group_entry(res, "race", "African-American").performance
    white = group_entry(res, "race", "Caucasian").performance
    assert round(100 * black["FPR"].estimate, 2) == 44.85
    assert round(100 * white["FPR"].estimate, 2) == 23.45
    assert round(100 * black["FNR"].estimate, 2) == 27.99
    assert round(100 * white["FNR"].estimate, 2) == 47.72
    pair = next(
        p
        for p in encoding(res, "race").pairs.fpr
        if {p.a, p.b} == {"African-American", "Caucasian"}
    )
    assert pair.abs_gap == pytest.approx(0.4485 - 0.2345, abs=1e-4)
    assert pair.gap_low > 0  # Black − White: the interval excludes 0


# ------------------------------------------------------------------ distances, compat
def small(threshold=0.5) -> AuditDataset:
    rng = np.random.default_rng(0)
    n = 2000
    df = pd.DataFrame(
        {
            "a": rng.choice(["x", "y", "z"], n),
            "b": rng.choice(["p", "q"], n),
            "y": rng.integers(0, 2, n),
        }
    )
    df["s"] = np.clip(rng.normal(0.35 + 0.3 * df["y"], 0.2), 0, 1).round(3)
    return AuditDataset.from_frame(df, ColumnRoles("y", ("a", "b"), score="s"), threshold=threshold)


def test_model_level_distances_and_lift_skews() -> None:
    ds = small(threshold=None)
    res = run_group_metrics(ds, GroupMetricsConfig())
    lift = run_group_metrics(ds, GroupMetricsConfig(lift_compat=True))
    codes, cats = ds.groups["a"].codes, ds.groups["a"].categories
    p = np.array(
        [
            [np.sum(1 - ds.prediction[codes == g]), np.sum(ds.prediction[codes == g])]
            for g in range(len(cats))
        ]
    )  # expected counts (G, ŷ)
    ph = p / p.sum()
    k = p.size
    assert finding(res, "tv_pred.a").estimate == pytest.approx(0.5 * np.abs(ph - 1 / k).sum())
    assert finding(res, "kl_pred.a").estimate == pytest.approx(np.sum(ph * np.log2(ph * k)))
    cat = encoding(res, "a").distances.model.categories
    assert [c.skew for c in cat] == pytest.approx(np.log(ph * k).ravel().tolist())
    lcat = encoding(lift, "a").distances.model.categories
    expected = np.log((p + 1) / (p.sum() + k)) + math.log(k)  # LiFT under UNIFORM
    assert [c.skew for c in lcat] == pytest.approx(expected.ravel().tolist())
    # default skew benefit vector: representation ratios p̂/q̂ ≥ 0; LiFT: raw skews
    ent = encoding(res, "a").benefits["skews_pred"]
    assert isinstance(ent, ListedBenefit)
    assert list(ent.entries.values()) == pytest.approx((ph * k).ravel().tolist())
    lent = encoding(lift, "a").benefits["skews_pred"]
    assert isinstance(lent, ListedBenefit)
    assert list(lent.entries.values()) == pytest.approx(expected.ravel().tolist())


def test_user_reference_population_shares() -> None:
    ds = small()
    cfg = GroupMetricsConfig(reference={"b": {"p": 0.5, "q": 0.5}})
    res = run_group_metrics(ds, cfg)
    assert res.parameters["reference"]["b"] == "user"
    lbl = ds.label
    codes = ds.groups["b"].codes
    w = np.array([[np.sum((codes == g) & (lbl == v)) for v in (0, 1)] for g in (0, 1)], float)
    pi = w.sum(0) / w.sum()
    q = np.outer([0.5, 0.5], pi)
    ph = w / w.sum()
    assert finding(res, "tv_label.b").estimate == pytest.approx(0.5 * np.abs(ph - q).sum())


def test_lift_compat_rounds_rates_before_differencing() -> None:
    # rates 1/3 and 1/6: LiFT rounds to .33333 and .16667 first -> gap .16666, not .16667
    df = pd.DataFrame(
        {
            "g": ["a"] * 3 + ["b"] * 6,
            "y": [0, 1, 0, 1, 0, 0, 1, 0, 1],
            "s": [1, 0, 0, 1, 0, 0, 0, 0, 0],
        }
    )
    ds = AuditDataset.from_frame(df, ColumnRoles("y", ("g",), score="s"), threshold=0.5)
    lift = run_group_metrics(ds, GroupMetricsConfig(lift_compat=True))
    row = encoding(lift, "g").pairs.positive_rate[0]
    assert row.lift_gap == 0.16666
    assert row.abs_gap == pytest.approx(1 / 6)
    assert finding(lift, "dp_gap_max.g").estimate == 0.16666
    assert group_entry(lift, "g", "a").positive_rate.lift == 0.33333


# ------------------------------------------------------------------ intersections, types
def test_intersection_cells_and_group_column_types() -> None:
    rng = np.random.default_rng(1)
    n = 600
    race = rng.choice(["b", "w"], n)
    flag = rng.integers(0, 2, n).astype(bool)
    df = pd.DataFrame(
        {
            "race": race,
            "race_cat": pd.Categorical(race),
            "race_int": (race == "w").astype(int),
            "flag": flag,
            "y": rng.integers(0, 2, n),
            "s": rng.random(n).round(2),
        }
    )
    # the combination (b, True) never occurs: it is not a cell
    df = df[~((df["race"] == "b") & df["flag"])]
    results = []
    for col in ("race", "race_cat", "race_int"):
        ds = AuditDataset.from_frame(df, ColumnRoles("y", (col, "flag"), score="s"), threshold=0.5)
        res = run_group_metrics(ds, GroupMetricsConfig())
        enc = encoding(res, f"{col} & flag")
        assert len(enc.groups) == 3
        results.append([g.positive_rate.estimate for g in enc.groups])
    np.testing.assert_allclose(results[0], results[1])
    np.testing.assert_allclose(results[0], results[2])


def test_intersection_helper_and_cap() -> None:
    a = GroupEncoding("a", np.array([0, 1, 2, 0, 1]), ("x", "y", "z"))
    b = GroupEncoding("b", np.array([0, 1, 1, 0, 0]), ("p", "q"))
    inter = intersect_groups([a, b])
    assert inter.encoding.categories == ("x & p", "y & p", "y & q", "z & q")
    np.testing.assert_array_equal(inter.encoding.codes, [0, 2, 3, 0, 1])
    with pytest.raises(DataContractError, match="4 non-empty cells, more than max_cells=3"):
        intersect_groups([a, b], max_cells=3)
    with pytest.raises(DataContractError, match="distinct"):
        intersect_groups([a, a])


def test_group_table_marginals_equal_direct_moments_and_merge() -> None:
    from fairengine.counts import GroupLabelMoments

    rng = np.random.default_rng(2)
    n = 1000
    a = GroupEncoding("a", rng.integers(0, 3, n), ("x", "y", "z"))
    b = GroupEncoding("b", rng.integers(0, 2, n), ("p", "q"))
    y = rng.integers(0, 2, n).astype(np.int8)
    p = rng.random(n)
    w = rng.uniform(0.1, 2, n)
    t = GroupTable.from_arrays([a, b], y, p, w, hard=False)
    direct = GroupLabelMoments.from_arrays("a", a.categories, a.codes, y, p, w, hard=False)
    for f in ("n", "w", "wp", "w2", "w2p", "w2p2"):
        np.testing.assert_allclose(getattr(t.moments("a"), f), getattr(direct, f))
    half = n // 2
    parts = [GroupEncoding(e.attribute, e.codes[:half], e.categories) for e in (a, b)]
    rest = [GroupEncoding(e.attribute, e.codes[half:], e.categories) for e in (a, b)]
    merged = GroupTable.from_arrays(parts, y[:half], p[:half], w[:half], hard=False) + (
        GroupTable.from_arrays(rest, y[half:], p[half:], w[half:], hard=False)
    )
    np.testing.assert_allclose(merged.moments(None).wp, t.moments(None).wp)


def test_group_table_reads_the_rows_without_copies() -> None:
    """Issue 23: no float or intp copy of a column; the pass over 2M rows peaks far below the
    role columns' bytes (uint8 codes, int8 label, float64 prediction: 12 bytes per row)."""
    import tracemalloc

    rng = np.random.default_rng(3)
    n = 2_000_000
    parts = [
        GroupEncoding(a, rng.integers(0, k, n).astype(np.uint8), tuple(map(str, range(k))))
        for a, k in (("a", 5), ("b", 4), ("c", 3))
    ]
    y = rng.integers(0, 2, n).astype(np.int8)
    p = rng.random(n)
    roles = y.nbytes + p.nbytes + sum(e.codes.nbytes for e in parts)
    for hard, pred in ((True, (p > 0.5).astype(float)), (False, p)):
        tracemalloc.start()
        t = GroupTable.from_arrays(parts, y, pred, hard=hard, score=p, bins=256)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 0.25 * roles, (hard, peak / roles)
        assert t.moments(None).n.sum() == n


def test_group_codes_outside_their_groups_are_an_error() -> None:
    y, p = np.array([0, 1, 0, 1]), np.array([0.0, 1, 1, 1])
    for codes in (np.array([0, 1, 2, 1]), np.array([0, -1, 1, 1]), np.array([0, 1, 300, 1])):
        with pytest.raises(DataContractError, match=r"codes must lie in 0\.\.1"):
            GroupTable.from_arrays([GroupEncoding("g", codes, ("a", "b"))], y, p, hard=True)


def test_empty_group_gives_undefined_rates_not_errors() -> None:
    # a category with no rows (e.g. an unused categorical level) in a hand-built encoding
    enc = GroupEncoding("g", np.array([0, 0, 1, 1]), ("a", "b", "empty"))
    t = GroupTable.from_arrays([enc], np.array([0, 1, 0, 1]), np.array([0.0, 1, 1, 1]), hard=True)
    m = t.moments("g")
    rate, _, n = m.rate((0, 1))
    assert n[2] == 0 and np.isnan(rate[2])


# ------------------------------------------------------------------ bad input and contract
def test_all_scores_equal_warns(adult) -> None:
    df = adult.copy()
    df.loc[df["sex"] == "Female", "score"] = 0.3
    res = run_group_metrics(adult_ds(df, threshold=None), GroupMetricsConfig(intersection=False))
    assert finding(res, "auc.sex.Female").estimate == 0.5
    assert any("all scores are equal in sex=Female" in w for w in res.warnings)


def test_group_without_positives_is_undefined_and_warned() -> None:
    df = pd.DataFrame(
        {
            "g": ["a"] * 4 + ["b"] * 4,
            "y": [0, 1, 0, 1, 0, 0, 0, 0],
            "s": [0.2, 0.8, 0.4, 0.6, 0.1, 0.9, 0.3, 0.7],
        }
    )
    ds = AuditDataset.from_frame(df, ColumnRoles("y", ("g",), score="s"), threshold=0.5)
    res = run_group_metrics(ds, GroupMetricsConfig())
    assert math.isnan(finding(res, "auc.g.b").estimate)
    assert math.isnan(group_entry(res, "g", "b").performance["RECALL"].estimate)
    assert any("AUC of g=b is undefined" in w for w in res.warnings)
    assert any("benefit vector auc of g" in w for w in res.warnings)


def test_bad_reference_raises() -> None:
    ds = small()
    with pytest.raises(DataContractError, match=r"missing \['q'\]"):
        run_group_metrics(ds, GroupMetricsConfig(reference={"b": {"p": 1.0}}))
    with pytest.raises(DataContractError, match="non-negative"):
        run_group_metrics(ds, GroupMetricsConfig(reference={"b": {"p": -1.0, "q": 2.0}}))
    with pytest.raises(DataContractError, match="not audited attributes"):
        run_group_metrics(ds, GroupMetricsConfig(reference={"sex": {"p": 1.0}}))


@pytest.mark.parametrize(
    "raw,match",
    [
        ({"aggregate_metrics": ["GINI"]}, "unknown aggregate metric 'GINI'; valid names"),
        ({"distance_metrics": ["HELLINGER"]}, "distance_metrics: unknown"),
        ({"performance_metrics": ["F1"]}, "valid names"),
        ({"levels": ["model", "world"]}, "methods.group_metrics.levels"),
        ({"auc_bins": 1}, "methods.group_metrics.auc_bins"),
        ({"atkinson_epsilon": -1.0}, "methods.group_metrics.atkinson_epsilon"),
        ({"confidence_level": 1.5}, "methods.group_metrics.confidence_level"),
        ({"distance_benefit_metrics": ["KL"]}, "distance_benefit_metrics"),
        ({"custom_metrics": {"m": "nocolon"}}, "custom_metrics.m"),
        ({"enabeld": True}, "did you mean"),
    ],
)
def test_config_errors_name_the_key(raw, match) -> None:
    with pytest.raises(ConfigError, match=match):
        AuditConfig.from_dict({"methods": {"group_metrics": raw}})


def test_config_from_yaml_types_and_aliases() -> None:
    cfg = AuditConfig.from_dict(
        {
            "methods": {
                "group_metrics": {
                    "lift_compat": True,
                    "aggregate_metrics": ["ATKINSONS_INDEX", "theil_t"],
                    "auc_bins": 1024,
                    "reference": {"sex": {"Female": 0.5, "Male": 0.5}},
                }
            }
        }
    ).methods.group_metrics
    assert cfg.aggregate_metrics == ["ATKINSON_INDEX", "THEIL_T_INDEX"]
    assert cfg.auc_bins == 1024 and cfg.enabled


def test_intersection_cap_error() -> None:
    with pytest.raises(DataContractError, match="max_intersection_cells=4"):
        run_group_metrics(small(), GroupMetricsConfig(max_intersection_cells=4))


def test_dataset_level_only_without_scores() -> None:
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"g": rng.choice(["a", "b"], 300), "y": rng.integers(0, 2, 300)})
    ds = AuditDataset.from_frame(df, ColumnRoles("y", ("g",)))
    res = run_group_metrics(ds, GroupMetricsConfig())
    assert res.parameters["levels"] == ["dataset"]
    assert any("no model scores" in w for w in res.warnings)
    keys = {f.key for f in res.findings}
    assert "kl_label.g" in keys and "base_rate_gap_max.g" in keys
    assert not any(k.startswith(("auc.", "dp_gap_max", "kl_pred")) for k in keys)


def test_custom_metric() -> None:
    cfg2 = GroupMetricsConfig(
        custom_metrics={"brier": f"{__name__}:brier"}, performance_benefit_metrics=["brier"]
    )
    ds = small(threshold=None)
    res = run_group_metrics(ds, cfg2)
    g = group_entry(res, "a", "x")
    sel = ds.groups["a"].codes == 0
    expected = np.mean((ds.probability[sel] - ds.label[sel]) ** 2)
    assert g.performance["brier"].estimate == pytest.approx(expected)
    assert "cv.brier.a" in {f.key for f in res.findings}


def brier(label, score, prediction, weights) -> float:
    return float(np.average((score - label) ** 2, weights=weights))


def test_result_contract_json_and_keys(adult) -> None:
    for compat in (False, True):
        res = run_group_metrics(
            adult_ds(adult), GroupMetricsConfig(lift_compat=compat, auc_gap_tests=True)
        )
        assert res.method == "group_metrics" and res.title == "Group metrics (LiFT suite)"
        text = json.dumps(res.to_dict()["details"], allow_nan=False)
        assert len(text) < 200_000
        keys = [f.key for f in res.findings]
        assert len(keys) == len(set(keys))
        assert all(k.replace(".", "").replace("_", "").replace("-", "").isalnum() for k in keys)
        tested = [f for f in res.findings if f.pvalue is not None]
        assert all(f.null_hypothesis and f.decision == "not_tested" for f in tested)
        assert bool(tested) == (not compat)


def test_lift_dataset_level_uses_observed_cells_only() -> None:
    """LiFT §1.3: the dataset job's UNIFORM covers observed (label, group) cells only; by
    default an empty cell is a real zero of the 2G categories."""
    df = pd.DataFrame({"g": ["a"] * 4 + ["b"] * 4, "y": [0, 1, 0, 1, 0, 0, 0, 0], "s": [0.5] * 8})
    ds = AuditDataset.from_frame(df, ColumnRoles("y", ("g",), score="s"), threshold=0.5)
    lift = run_group_metrics(ds, GroupMetricsConfig(lift_compat=True))
    cats = encoding(lift, "g").distances.dataset.categories
    assert [(c.group, c.outcome) for c in cats] == [("a", 0), ("a", 1), ("b", 0)]
    k, p = 3, np.array([2.0, 2.0, 4.0])
    expected = np.log((p + 1) / (p.sum() + k)) + math.log(k)
    assert [c.skew for c in cats] == pytest.approx(expected.tolist())
    ours = run_group_metrics(ds, GroupMetricsConfig())
    cats = encoding(ours, "g").distances.dataset.categories
    assert len(cats) == 4 and cats[3].skew == -np.inf  # log(0): no positives in b
    ph = np.array([2, 2, 4, 0]) / 8
    assert finding(ours, "tv_label.g").estimate == pytest.approx(0.5 * np.abs(ph - 0.25).sum())
