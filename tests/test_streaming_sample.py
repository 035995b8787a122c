"""The stratified sample drawn in the same pass (:mod:`fairengine.streaming.sample`): strata
sizes, design weights, reproducibility; and the row-based tests that run on it say so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fairengine.dataset import AuditDataset
from fairengine.permutation.config import PermutationConfig
from fairengine.permutation.method import run_permutation_tests_from_counts
from fairengine.roles import ColumnRoles
from fairengine.streaming import stream_counts
from fairengine.streaming.sample import WEIGHT_COLUMN

ROLES = ColumnRoles(label="y", protected=("race", "sex"), score="score")


def frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "race": rng.choice(np.array(["a", "b", "c"]), n, p=[0.7, 0.25, 0.05]),
            "sex": rng.choice(np.array(["f", "m"]), n),
            "y": rng.integers(0, 2, n),
            "score": rng.random(n),
            "x": rng.normal(size=n),
        }
    )


def write(folder: Path, frames: list[pd.DataFrame]) -> None:
    for i, f in enumerate(frames):
        pq.write_table(
            pa.Table.from_pandas(f, preserve_index=False), folder / f"part-{i:05d}.parquet"
        )


def test_sample_strata_sizes(tmp_path: Path) -> None:
    """Each (race × sex × label) stratum keeps min(n_s, L) rows, L the largest equal share
    that fits sample_rows; the design weights add up to the row count."""
    df = frame(50_000)
    write(tmp_path, [df.iloc[lo : lo + 7_000] for lo in range(0, 50_000, 7_000)])
    counts = stream_counts(
        tmp_path, ROLES, threshold=0.5, batch_rows=3_000, sample_rows=6_000, seed=4
    )
    sample = counts.sample
    truth = df.groupby(["race", "sex", "y"]).size()
    strata = sample.strata.set_index(["race", "sex", "label"])
    assert len(strata) == len(truth) == 12
    assert strata["rows"].tolist() == truth.tolist()
    level = sample.level
    assert (strata["sampled"] == np.minimum(strata["rows"], level)).all()
    assert strata["sampled"].sum() <= 6_000 < strata["sampled"].sum() + len(strata)
    assert sample.n_rows == strata["sampled"].sum()
    assert sample.frame[WEIGHT_COLUMN].sum() == pytest.approx(50_000)
    got = sample.frame.groupby(["race", "sex", "y"]).size()
    assert got.tolist() == strata["sampled"].tolist()
    again = stream_counts(
        tmp_path, ROLES, threshold=0.5, batch_rows=3_000, sample_rows=6_000, seed=4
    )
    pd.testing.assert_frame_equal(again.sample.frame, sample.frame)
    assert "from a stratified sample of" in sample.describe()
    # plain values, not categoricals in file-dictionary order
    assert not isinstance(sample.frame["race"].dtype, pd.CategoricalDtype)


def test_tests_needing_rows_run_on_the_sample_and_say_so(tmp_path: Path) -> None:
    df = frame(40_000, seed=2)
    write(tmp_path, [df.iloc[:20_000], df.iloc[20_000:]])
    counts = stream_counts(tmp_path, ROLES, threshold=0.5, batch_rows=8_000, sample_rows=4_000)
    rows = AuditDataset.from_frame(
        counts.sample.frame.drop(columns=WEIGHT_COLUMN), ROLES, threshold=0.5
    )
    cfg = PermutationConfig(metrics=["tpr", "auc"], n_permutations=199, attributes=["sex"])
    res = run_permutation_tests_from_counts(counts, cfg, seed=0, sample=rows)
    by_key = {f.key: f for f in res.findings}
    assert set(by_key) == {"perm_tpr.sex.f_m", "perm_auc.sex.f_m"}
    auc = by_key["perm_auc.sex.f_m"]
    assert f"from a sample of {rows.n_rows:,} rows" in auc.label
    assert "not from all rows" in auc.reading
    assert "sample" not in by_key["perm_tpr.sex.f_m"].label  # exact, from the counts
    assert any("computed from a sample of" in w for w in res.warnings)


def test_row_keys_are_uniform_and_do_not_depend_on_the_batches() -> None:
    """The sample's keys (a seeded SplitMix64 hash of file and row offset): the same key for a
    row however its file is cut into batches; over 200,000 rows the keys pass a
    Kolmogorov-Smirnov test against U(0, 1) and neighbouring rows' and two seeds' keys are
    uncorrelated (|r| below 4 standard errors, 1/sqrt(n))."""
    from scipy import stats

    from fairengine.streaming.sample import row_keys

    n = 200_000
    keys = row_keys(3, "part-00001.parquet", 0, n)
    pieces = np.concatenate(
        [row_keys(3, "part-00001.parquet", lo, min(7_001, n - lo)) for lo in range(0, n, 7_001)]
    )
    np.testing.assert_array_equal(keys, pieces)
    assert keys.min() >= 0 and keys.max() < 1
    assert stats.kstest(keys, "uniform").pvalue > 1e-4
    bound = 4 / np.sqrt(n)
    assert abs(np.corrcoef(keys[:-1], keys[1:])[0, 1]) < bound
    other_seed = row_keys(4, "part-00001.parquet", 0, n)
    other_file = row_keys(3, "part-00002.parquet", 0, n)
    assert abs(np.corrcoef(keys, other_seed)[0, 1]) < bound
    assert abs(np.corrcoef(keys, other_file)[0, 1]) < bound


def test_a_sample_larger_than_the_data_keeps_every_row(tmp_path: Path) -> None:
    """sample_rows above the row count: every stratum keeps all its rows, however the files are
    cut into batches (a level of max n_s while rows still arrived used to cap the largest
    stratum early and lose some of its later rows), and each row once."""
    df = frame(9_000, seed=7).assign(id=np.arange(9_000))
    write(tmp_path, [df.iloc[lo : lo + 3_000] for lo in range(0, 9_000, 3_000)])
    counts = stream_counts(
        tmp_path, ROLES, threshold=0.5, batch_rows=250, sample_rows=10_000,
        sample_columns=["id"], seed=1,
    )  # fmt: skip
    sample = counts.sample
    assert (sample.strata["sampled"] == sample.strata["rows"]).all()
    assert sorted(sample.frame["id"]) == list(range(9_000))
    assert (sample.frame[WEIGHT_COLUMN] == 1.0).all()
    # each row remembers its file and offset there
    files = sample.source_file
    assert files is not None and sample.source_row is not None
    position = np.array([counts.files.index(f) for f in files]) * 3_000 + sample.source_row
    np.testing.assert_array_equal(position, sample.frame["id"].to_numpy())
