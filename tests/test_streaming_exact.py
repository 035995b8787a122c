"""Streamed count tables give the pandas audit's findings (issue 21): 2M rows, 3 protected
attributes, label and score, written as 37 Parquet files (flat, and hive-partitioned by one
column), every count-based finding of group parity, group metrics, the proportion permutation
tests and the intersectional audit equal to the pandas path's to 1e-12, with the same p-values
from the same seed."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fairengine.dataset import AuditDataset
from fairengine.group_metrics.config import GroupMetricsConfig
from fairengine.group_metrics.method import run_group_metrics, run_group_metrics_from_counts
from fairengine.group_parity.method import group_parity, group_parity_from_counts
from fairengine.intersectional.config import IntersectionalConfig
from fairengine.intersectional.method import run_intersectional, run_intersectional_from_counts
from fairengine.permutation.config import PermutationConfig
from fairengine.permutation.method import run_permutation_tests, run_permutation_tests_from_counts
from fairengine.results import MethodResult
from fairengine.roles import ColumnRoles
from fairengine.streaming import stream_counts

N_ROWS = 2_000_000
N_FILES = 37
ROLES = ColumnRoles(label="y", protected=("race", "sex", "age"), score="score")
TOL = 1e-12


def synthetic(n: int, seed: int = 7) -> pd.DataFrame:
    """Groups of unequal sizes and rates, a score that depends on group and label."""
    rng = np.random.default_rng(seed)
    race = rng.choice(
        np.array(["white", "black", "asian", "hispanic", "other"]),
        n,
        p=[0.55, 0.2, 0.12, 0.1, 0.03],
    )
    sex = rng.choice(np.array([1, 2], dtype=np.int64), n)
    age = rng.choice(np.array(["<25", "25-60", ">60"]), n, p=[0.2, 0.6, 0.2])
    shift = (race == "black") * 0.3 + (sex == 2) * 0.2 + (age == ">60") * 0.1
    y = (rng.random(n) < 0.3 + 0.2 * (race == "white")).astype(np.int64)
    logit = -0.5 + 1.5 * y - shift + rng.normal(0, 1, n)
    score = 1 / (1 + np.exp(-logit))
    return pd.DataFrame({"race": race, "sex": sex, "age": age, "y": y, "score": score})


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("stream")
    df = synthetic(N_ROWS)
    flat = root / "flat"
    flat.mkdir()
    edges = np.linspace(0, N_ROWS, N_FILES + 1).astype(int)
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        table = pa.Table.from_pandas(df.iloc[lo:hi], preserve_index=False)
        pq.write_table(table, flat / f"part-{i:05d}.parquet", row_group_size=200_000)
    hive = root / "hive"  # partitioned by age: 3 folders, 37 files in all
    for j, age in enumerate(["<25", "25-60", ">60"]):
        part = df[df["age"] == age].drop(columns="age")
        folder = hive / f"age={age}"
        folder.mkdir(parents=True)
        k = [12, 13, 12][j]
        cuts = np.linspace(0, len(part), k + 1).astype(int)
        for i, (lo, hi) in enumerate(itertools.pairwise(cuts)):
            pq.write_table(
                pa.Table.from_pandas(part.iloc[lo:hi], preserve_index=False),
                folder / f"part-{i:05d}.parquet",
            )
    return {"df": df, "flat": flat, "hive": hive}


def _close(a: Any, b: Any, path: str = "") -> None:
    """Recursive equality of JSON values, numbers to TOL (absolute, or relative when large)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (path, set(a) ^ set(b))
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and not isinstance(b, str):
        if a is None or b is None:
            assert a is b, path
        elif math.isnan(a):
            assert math.isnan(b), path
        else:
            assert b == pytest.approx(a, rel=TOL, abs=TOL), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _same_result(
    rows: MethodResult, streamed: MethodResult, skip_keys: set[str] = frozenset()
) -> None:
    a, b = rows.to_dict(), streamed.to_dict()
    for d in (a, b):
        d.pop("seconds", None)
        d.pop("warnings", None)
    a["findings"] = [f for f in a["findings"] if f["key"] not in skip_keys]
    _close(a, b)


@pytest.fixture(scope="module")
def hard(data: dict[str, Any]) -> tuple[AuditDataset, Any]:
    ds = AuditDataset.from_frame(data["df"], ROLES, threshold=0.5)
    counts = stream_counts(data["flat"], ROLES, threshold=0.5, batch_rows=20_000)
    return ds, counts


def test_categories_and_counts(data: dict[str, Any], hard: tuple[AuditDataset, Any]) -> None:
    ds, counts = hard
    assert counts.n_rows == N_ROWS and len(counts.files) == N_FILES
    assert counts.n_batches > N_FILES  # files are read in several batches
    for a in ROLES.protected:
        assert counts.categories[a] == ds.groups[a].categories
        assert np.array_equal(counts.group_sizes(a), ds.groups[a].sizes())
    hive = stream_counts(data["hive"], ROLES, threshold=0.5, batch_rows=150_000)
    assert len(hive.files) == N_FILES
    assert hive.categories == counts.categories
    for k in ("n", "wp"):
        assert np.array_equal(hive.grid[k], counts.grid[k])
    assert np.array_equal(hive.hist_w, counts.hist_w)


def test_group_parity(hard: tuple[AuditDataset, Any]) -> None:
    ds, counts = hard
    _same_result(group_parity(ds), group_parity_from_counts(counts))


def test_group_metrics(hard: tuple[AuditDataset, Any]) -> None:
    ds, counts = hard
    cfg = GroupMetricsConfig(auc_gap_tests=True)
    _same_result(run_group_metrics(ds, cfg), run_group_metrics_from_counts(counts, cfg))


def test_permutation_tests(hard: tuple[AuditDataset, Any]) -> None:
    ds, counts = hard
    cfg = PermutationConfig(
        metrics=["positive_rate", "tpr", "fpr", "fnr", "precision"], n_permutations=499
    )
    rows = run_permutation_tests(ds, cfg, seed=11)
    streamed = run_permutation_tests_from_counts(counts, cfg, seed=11)
    _same_result(rows, streamed)
    assert all(f.pvalue is not None for f in streamed.findings)


def test_permutation_tests_needing_rows_say_so(hard: tuple[AuditDataset, Any]) -> None:
    _, counts = hard
    cfg = PermutationConfig(metrics=["tpr", "auc"], n_permutations=99, attributes=["sex"])
    res = run_permutation_tests_from_counts(counts, cfg, seed=0)
    assert [f.key for f in res.findings] == ["perm_tpr.sex.1_2"]
    assert any("perm_auc.sex.1_2: skipped, needs rows" in w for w in res.warnings)


def test_intersectional(hard: tuple[AuditDataset, Any]) -> None:
    ds, counts = hard
    cfg = IntersectionalConfig(n_bootstrap=300, n_posterior=300)
    _same_result(
        run_intersectional(ds, cfg, seed=5), run_intersectional_from_counts(counts, cfg, seed=5)
    )


def test_expected_counts(data: dict[str, Any]) -> None:
    """Without a threshold (probabilities: float sums) the findings agree to 1e-12."""
    ds = AuditDataset.from_frame(data["df"], ROLES)
    counts = stream_counts(data["flat"], ROLES, batch_rows=300_000)
    _same_result(group_parity(ds), group_parity_from_counts(counts))
    cfg = GroupMetricsConfig()
    _same_result(run_group_metrics(ds, cfg), run_group_metrics_from_counts(counts, cfg))
    icfg = IntersectionalConfig(n_bootstrap=200, n_posterior=200)
    _same_result(
        run_intersectional(ds, icfg, seed=3), run_intersectional_from_counts(counts, icfg, seed=3)
    )


def test_weighted_group_parity(tmp_path: Path) -> None:
    df = synthetic(60_000, seed=3)
    df["w"] = np.random.default_rng(0).gamma(2.0, 1.0, len(df))
    for i, lo in enumerate(range(0, len(df), 7_000)):
        pq.write_table(
            pa.Table.from_pandas(df.iloc[lo : lo + 7_000], preserve_index=False),
            tmp_path / f"p{i:02d}.parquet",
        )
    roles = ColumnRoles(label="y", protected=("race", "sex", "age"), score="score", weight="w")
    ds = AuditDataset.from_frame(df, roles, threshold=0.5)
    counts = stream_counts(tmp_path, roles, threshold=0.5, batch_rows=5_000)
    _same_result(group_parity(ds), group_parity_from_counts(counts))
    icfg = IntersectionalConfig(n_bootstrap=100, n_posterior=100)
    _same_result(
        run_intersectional(ds, icfg, seed=1), run_intersectional_from_counts(counts, icfg, seed=1)
    )
