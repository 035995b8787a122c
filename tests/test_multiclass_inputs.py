"""fairengine.multiclass.inputs and .findings: bad input gives errors naming the array; the
findings' keys are unique valid MLflow names of the documented format, with plain readings and
stated nulls; the COMPAS score_text audit (3 classes) by race and sex runs end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fairengine.errors import DataContractError
from fairengine.finding_keys import check_unique_keys, key_token
from fairengine.multiclass import (
    all_pair_tests,
    check_inputs,
    differential_fairness,
    group_class_rates,
    multiclass_findings,
)
from fairengine.results import Finding

COMPAS = Path("/work/shared/data/compas/compas-scores-two-years.csv.gz")
CLASSES = ["Low", "Medium", "High"]


def _ok() -> dict[str, object]:
    return {
        "y": np.array([0, 1, 2, 1]),
        "prediction": np.array([0, 2, 2, 1]),
        "groups": np.array([0, 0, 1, 1]),
        "categories": ["a", "b"],
        "classes": CLASSES,
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"y": np.array([0, 1, 3, 1])}, r"y must hold class codes 0..2: 1 value\(s\) out of range"),
        ({"y": np.array([0, 1, np.nan, 1])}, r"y must hold integer class codes.*NaN"),
        ({"prediction": np.array([0, -1, 2, 1])}, "prediction must hold predicted class codes"),
        ({"prediction": np.array([0, 1, 2])}, r"prediction must be a 1-D array.*\(4\)"),
        (
            {"prediction": np.array([[0.5, 0.5, 0.1]] * 4)},
            r"prediction rows must sum to 1.*row 0 sums to 1.1",
        ),
        (
            {"prediction": np.array([[0.5, 0.5, 0.0]] * 3 + [[np.nan, 0.5, 0.5]])},
            r"prediction must hold finite probabilities.*row 3",
        ),
        ({"prediction": np.ones((4, 2)) / 2}, r"shape \(rows, classes\) = \(4, 3\)"),
        ({"prediction": np.array([[1.5, -0.5, 0.0]] * 4)}, "probabilities >= 0"),
        ({"groups": np.array([0, 0, 2, 1])}, "groups must hold group codes 0..1"),
        ({"groups": np.array([0, 0, 0, 0])}, r"group 'b' \(code 1\) has 0 row"),
        ({"weights": np.array([1.0, np.nan, 1.0, 1.0])}, "weights must be finite"),
        ({"weights": np.array([1.0, -1.0, 1.0, 1.0])}, "weights must be non-negative"),
        ({"weights": np.array([1.0, 1.0, 0.0, 0.0])}, "positive weight"),
        ({"classes": ["Low"]}, "at least two classes"),
        ({"categories": ["a", "a"]}, "categories must be distinct"),
    ],
)
def test_bad_input_names_the_array(change: dict[str, object], message: str) -> None:
    args = {**_ok(), **change}
    with pytest.raises(DataContractError, match=message):
        check_inputs(
            args["y"],
            args["prediction"],
            args["groups"],
            args["categories"],  # type: ignore[arg-type]
            args["classes"],  # type: ignore[arg-type]
            args.get("weights"),
        )


def test_unknown_probability_mode() -> None:
    a = _ok()
    with pytest.raises(DataContractError, match="probabilities must be one of"):
        group_class_rates(
            a["y"], a["prediction"], a["groups"], ["a", "b"], CLASSES, probabilities="soft"
        )


def _findings(seed: int = 0) -> list[Finding]:
    rng = np.random.default_rng(seed)
    n = 600
    codes = rng.integers(0, 3, n)
    y = rng.integers(0, 3, n)
    pred = np.where(rng.random(n) < 0.6, y, rng.integers(0, 3, n))
    cats = ["African-American", "age_group", "白人"]
    kw = {"attribute": "race"}
    rates = group_class_rates(y, pred, codes, cats, CLASSES, **kw)  # type: ignore[arg-type]
    pairs = all_pair_tests(y, pred, codes, cats, CLASSES, n_permutations=99, **kw)  # type: ignore[arg-type]
    eps = differential_fairness(y, pred, codes, cats, CLASSES, **kw)  # type: ignore[arg-type]
    return multiclass_findings(rates, pairs, eps)


def test_findings_keys_and_readings() -> None:
    f = _findings()
    check_unique_keys(f)
    # 3 groups × 3 metrics × 3 classes, 3 pairs × (9 differences + 3 distances), 1 ε
    assert len(f) == 27 + 36 + 1
    keys = {x.key: x for x in f}
    tpr = keys["mc_tpr.High.race.African-American_age__group"]
    assert tpr.pvalue is not None and tpr.null_kind == "zero"
    assert tpr.null_hypothesis.startswith("true-positive rate of class High(African-American) =")
    assert tpr.resampling[0].name == "permutation" and tpr.resampling[0].resamples == 99
    assert tpr.question is not None and "mc_tpr.High" in tpr.question
    assert "mc_group_fpr.Low.race.age__group" in keys
    hashed = key_token("白人")  # a hashed token, x + 8 hex digits
    assert f"mc_hellinger.race.age__group_{hashed}" in keys
    assert keys["mc_epsilon.race"].pvalue is None
    tv = keys["mc_tv.race.African-American_age__group"]
    assert "same distribution" in tv.null_hypothesis and tv.reading.startswith("The total")
    assert all(x.reading for x in f)


def _compas() -> tuple[np.ndarray, ...] | None:
    """COMPAS score_text (Low/Medium/High) against a 3-class truth: no recidivism within two
    years (Low), non-violent recidivism (Medium), violent recidivism (High) — two_year_recid and
    is_violent_recid; ProPublica's row filter; race as African-American, Caucasian, Hispanic,
    Other (Asian, Native American and Other merged: 11 and 31 rows)."""
    if not COMPAS.exists():
        return None
    import pandas as pd

    df = pd.read_csv(COMPAS, usecols=[
        "race", "sex", "score_text", "two_year_recid", "is_violent_recid",
        "days_b_screening_arrest", "is_recid", "c_charge_degree",
    ])  # fmt: skip
    df = df[
        df.days_b_screening_arrest.between(-30, 30)
        & (df.is_recid != -1)
        & (df.c_charge_degree != "O")
        & (df.score_text != "N/A")
    ]
    pred = df.score_text.map({c: i for i, c in enumerate(CLASSES)}).to_numpy()
    recid = df.two_year_recid.to_numpy() == 1
    y = np.where(recid, np.where(df.is_violent_recid.to_numpy() == 1, 2, 1), 0)
    race_cats = ["African-American", "Caucasian", "Hispanic", "Other"]
    race = df.race.where(df.race.isin(race_cats[:3]), "Other")
    race_codes = race.map({c: i for i, c in enumerate(race_cats)}).to_numpy()
    sex_codes = (df.sex == "Male").to_numpy().astype(int)
    return y, pred, race_codes, sex_codes


def test_compas_score_text_audit() -> None:
    data = _compas()
    if data is None:
        pytest.skip("COMPAS data not available")
    y, pred, race, sex = data
    assert y.size == 6172
    out = []
    for attr, codes, cats in (
        ("race", race, ["African-American", "Caucasian", "Hispanic", "Other"]),
        ("sex", sex, ["Female", "Male"]),
    ):
        rates = group_class_rates(y, pred, codes, cats, CLASSES, attribute=attr)
        pairs = all_pair_tests(y, pred, codes, cats, CLASSES, n_permutations=999, attribute=attr)
        eps = differential_fairness(y, pred, codes, cats, CLASSES, attribute=attr, n_draws=1000)
        out += multiclass_findings(rates, pairs, eps)
    check_unique_keys(out)
    keys = {f.key: f for f in out}
    # ProPublica's finding in three classes: Black defendants are scored High far more often
    sel = keys["mc_selection.High.race.African-American_Caucasian"]
    assert sel.estimate > 0.1 and sel.pvalue == pytest.approx(1 / 1000)
    assert keys["mc_tv.race.African-American_Caucasian"].pvalue == pytest.approx(1 / 1000)


def test_undefined_difference_is_not_tested() -> None:
    # group b has no row of true class High: its TPR of High is undefined
    y = np.array([0, 1, 2, 2, 0, 1, 0, 1])
    pred = np.array([0, 1, 2, 1, 0, 0, 0, 1])
    codes = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    pairs = all_pair_tests(y, pred, codes, ["a", "b"], CLASSES, n_permutations=19)
    f = {x.key: x for x in multiclass_findings(None, pairs)}
    undefined = f["mc_tpr.High.group.a_b"]
    assert undefined.pvalue is None and "undefined in group=b" in undefined.reading
    assert f["mc_tpr.Low.group.a_b"].pvalue is not None
