"""What the cluster engines' tests share (tests/test_dask_engine.py, tests/test_spark_engine.py):
a synthetic table with known structure, written as Parquet files, and the two comparisons —
count tables (integer cells exactly, float sums to 1e-12 relative) and audit findings (every
estimate and p-value to 1e-12, every decision, the verdict; the binned AUC excepted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.roles import ColumnRoles

ROLES = ColumnRoles(label="y", protected=("race", "sex"), score="score", features=("x",))
WEIGHTED = ColumnRoles(
    label="y", protected=("race", "sex"), score="score", features=("x",), weight="w"
)
COUNT_METHODS = ["group_parity", "group_metrics", "permutation_tests", "intersectional"]
N_FILES = 37


def table(n: int, seed: int = 0) -> pd.DataFrame:
    """Four races of unequal size, a label and score that depend on race, weights, a raw
    score (``logit``)."""
    rng = np.random.default_rng(seed)
    race = rng.choice(["a", "b", "c", "d"], n, p=[0.5, 0.3, 0.15, 0.05])
    x = rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(x + 0.4 * (race == "a"))))).astype(int)
    logit = 0.9 * x + 0.5 * (race == "a")
    return pd.DataFrame(
        {
            "race": race,
            "sex": rng.choice(["f", "m"], n),
            "x": x,
            "y": y,
            "score": 1 / (1 + np.exp(-logit)),
            "logit": logit,
            "w": rng.gamma(2.0, 0.5, n),
        }
    )


def write_files(df: pd.DataFrame, folder: Path, k: int = N_FILES) -> Path:
    """``df`` as ``k`` Parquet files of consecutive rows (``part-000.parquet``, ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(np.array_split(np.arange(len(df)), k)):
        df.iloc[rows].to_parquet(folder / f"part-{i:03d}.parquet", index=False)
    return folder


def same_counts(a, b) -> None:
    """Equal count tables: integer cells exactly, float sums to 1e-12 relative."""
    assert a.categories == b.categories and a.n_rows == b.n_rows
    assert set(a.grid) == set(b.grid)
    for k in a.grid:
        if a.grid[k].dtype.kind == "i":
            np.testing.assert_array_equal(a.grid[k], b.grid[k], err_msg=k)
        else:
            np.testing.assert_allclose(a.grid[k], b.grid[k], rtol=1e-12, atol=0, err_msg=k)
    assert (a.hist_w is None) == (b.hist_w is None)
    if a.hist_w is not None:
        assert a.hist_w.dtype == b.hist_w.dtype
        np.testing.assert_allclose(a.hist_w, b.hist_w, rtol=1e-12, atol=0)
        np.testing.assert_allclose(a.hist_w2, b.hist_w2, rtol=1e-12, atol=0)


def same_findings(streamed, in_memory) -> None:
    """A streamed audit's findings equal the in-memory audit's (the binned AUC excepted)."""
    a = {f.key: f for f in streamed.findings()}
    b = {f.key: f for f in in_memory.findings()}
    assert set(a) == set(b) and len(a) > 50
    same = [k for k in a if "auc" not in k]  # the streamed AUC is the binned one
    assert len(same) > 40
    for k in same:
        assert a[k].estimate == pytest.approx(b[k].estimate, abs=1e-12, nan_ok=True), k
        assert (a[k].pvalue is None) == (b[k].pvalue is None), k
        if a[k].pvalue is not None:
            assert a[k].pvalue == pytest.approx(b[k].pvalue, abs=1e-12), k
        assert a[k].decision == b[k].decision, k
    assert streamed.verdict.status == in_memory.verdict.status


def spoil_file(path: Path, change: str, rows: int = 1) -> None:
    """Rewrite one Parquet file with a fault: ``drop_race`` (no 'race' column), ``null_race``
    (the first ``rows`` rows without a race), ``text_score`` (the score as text) or
    ``big_score`` (row 7's score 1.5)."""
    bad = pd.read_parquet(path)
    if change == "drop_race":
        bad = bad.drop(columns=["race"])
    elif change == "null_race":
        bad.loc[bad.index[:rows], "race"] = None
    elif change == "big_score":
        bad.loc[bad.index[7], "score"] = 1.5
    elif change == "text_score":
        bad["score"] = bad["score"].astype(str)
    else:
        raise ValueError(f"unknown change {change!r}")
    bad.to_parquet(path, index=False)
