"""The intersection count table (one pass, weights, marginals) and its bad-input errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.intersectional import (
    IntersectionalConfig,
    auditable_mask,
    differential_fairness,
    run_intersectional,
    support_status,
    table_from_arrays,
)
from fairengine.roles import ColumnRoles


def _rows(n: int = 3000, seed: int = 0, levels: tuple[int, ...] = (2, 3, 4)) -> dict:
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, L, n) for L in levels]
    y = (rng.random(n) < 0.3).astype(np.int8)
    p = rng.random(n)
    return {"codes": codes, "y": y, "p": p, "w": rng.gamma(2.0, 1.0, n), "levels": levels}


def _table(d: dict, *, pred: str = "hard", weights: bool = False):
    levels = [[f"v{i}" for i in range(L)] for L in d["levels"]]
    attrs = [f"a{j}" for j in range(len(levels))]
    prediction = {"hard": (d["p"] > 0.5).astype(float), "expected": d["p"], "none": None}[pred]
    return table_from_arrays(
        attrs,
        levels,
        d["codes"],
        d["y"],
        prediction,
        d["w"] if weights else None,
        hard=pred != "expected",
    )


@pytest.mark.parametrize("pred", ["hard", "expected", "none"])
@pytest.mark.parametrize("weights", [False, True])
def test_counts_equal_pandas_groupby(pred: str, weights: bool) -> None:
    """C[s, y, ŷ] equals an independent pandas groupby over (a0, a1, a2, y)."""
    d = _rows()
    t = _table(d, pred=pred, weights=weights)
    w = d["w"] * len(d["w"]) / d["w"].sum() if weights else np.ones(len(d["y"]))
    phat = {"hard": (d["p"] > 0.5).astype(float), "expected": d["p"], "none": 0.0 * d["p"]}[pred]
    frame = pd.DataFrame(
        {"a0": d["codes"][0], "a1": d["codes"][1], "a2": d["codes"][2], "y": d["y"]}
    )
    frame["pos"] = w * phat
    frame["neg"] = w * (1 - phat)
    g = frame.groupby(["a0", "a1", "a2", "y"])[["neg", "pos"]].sum()
    full = pd.MultiIndex.from_product([range(2), range(3), range(4), range(2)])
    expected = g.reindex(full, fill_value=0.0).to_numpy().reshape(24, 2, 2)
    np.testing.assert_allclose(t.counts, expected, rtol=1e-12, atol=1e-9)
    assert t.sizes().sum() == len(d["y"])
    assert t.weighted is weights
    assert t.prediction == pred
    assert t.names()[23] == "v1 × v2 × v3"  # last flat id = last level of every attribute


def test_marginal_equals_table_of_fewer_attributes_and_tables_add() -> None:
    d = _rows(seed=1)
    t = _table(d)
    direct = table_from_arrays(
        ["a2", "a0"],
        [["v0", "v1", "v2", "v3"], ["v0", "v1"]],
        [d["codes"][2], d["codes"][0]],
        d["y"],
        (d["p"] > 0.5).astype(float),
    )
    m = t.marginal(["a2", "a0"])
    np.testing.assert_array_equal(m.counts, direct.counts)
    assert m.names() == direct.names()
    half = len(d["y"]) // 2
    parts = [
        table_from_arrays(
            ["a0", "a1", "a2"],
            [["v0", "v1"], ["v0", "v1", "v2"], ["v0", "v1", "v2", "v3"]],
            [c[sl] for c in d["codes"]],
            d["y"][sl],
            (d["p"][sl] > 0.5).astype(float),
        )
        for sl in (slice(0, half), slice(half, None))
    ]
    np.testing.assert_array_equal((parts[0] + parts[1]).counts, t.counts)


def test_support_status_and_policy() -> None:
    d = np.array([0, 0, 5, 40, 29])
    n = np.array([0, 10, 5, 40, 29])
    status = support_status(d, n, min_support=30)
    assert status.tolist() == ["empty", "unsupported", "sparse", "ok", "sparse"]
    assert auditable_mask(status).tolist() == [False, False, True, True, True]
    assert auditable_mask(status, exclude_sparse=True).tolist() == [False] * 3 + [True, False]
    assert auditable_mask(status, include_empty=True).all()


def test_hundreds_of_levels_are_capped_with_a_clear_message() -> None:
    rng = np.random.default_rng(0)
    n = 5000
    frame = pd.DataFrame(
        {
            "zip": rng.integers(0, 300, n).astype(str),
            "sex": rng.choice(["F", "M"], n),
            "y": rng.integers(0, 2, n),
            "score": rng.random(n),
        }
    )
    ds = AuditDataset.from_frame(frame, ColumnRoles("y", ("zip", "sex"), score="score"))
    with pytest.raises(DataContractError, match=r"'zip' has 300 levels.*max_levels=64"):
        run_intersectional(ds, IntersectionalConfig())
    with pytest.raises(DataContractError, match=r"600 cells.*max_intersections=100"):
        run_intersectional(ds, IntersectionalConfig(max_levels=400, max_intersections=100))


def test_all_empty_and_unauditable_tables_raise() -> None:
    with pytest.raises(DataContractError, match="empty: no rows"):
        table_from_arrays(["a"], [["x", "y"]], [np.zeros(0, int)], np.zeros(0, int))
    d = _rows(n=200, seed=2)
    with pytest.raises(DataContractError, match="weights sum to zero"):
        table_from_arrays(["a"], [["x", "y"]], [d["codes"][0]], d["y"], None, np.zeros(200))
    # No positive labels at all: every intersection is unsupported for the TPR.
    t = table_from_arrays(
        ["a"], [["x", "y"]], [d["codes"][0]], np.zeros(200, int), (d["p"] > 0.5).astype(float)
    )
    with pytest.raises(DataContractError, match=r"only 0 of 2 intersections.*'unsupported': 2"):
        differential_fairness(t, "tpr")
    with pytest.raises(DataContractError, match="needs model predictions"):
        differential_fairness(_table(d, pred="none"), "sp")


def test_negative_or_nonfinite_weights_raise_naming_weights() -> None:
    d = _rows(n=100, seed=3)
    w = d["w"].copy()
    w[[3, 7]] = -1.0
    with pytest.raises(DataContractError, match=r"weights must be finite and non-negative; 2"):
        table_from_arrays(["a"], [["x", "y"]], [d["codes"][0]], d["y"], None, w)
    w[[3, 7]] = np.nan
    with pytest.raises(DataContractError, match="weights must be finite"):
        table_from_arrays(["a"], [["x", "y"]], [d["codes"][0]], d["y"], None, w)


def test_bad_codes_labels_predictions_raise() -> None:
    d = _rows(n=100, seed=4)
    with pytest.raises(DataContractError, match=r"codes of 'a' must be integers in 0..1"):
        table_from_arrays(["a"], [["x", "y"]], [d["codes"][2]], d["y"])
    with pytest.raises(DataContractError, match="label must be"):
        table_from_arrays(["a"], [["x", "y"]], [d["codes"][0]], d["y"] * 2)
    with pytest.raises(DataContractError, match="hard predictions must be 0/1"):
        table_from_arrays(["a"], [["x", "y"]], [d["codes"][0]], d["y"], d["p"])
