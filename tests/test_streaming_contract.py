"""Bad input at scale names the file (issue 21): a file missing a column, a file with a column
of another type, a null protected value in one partition, a label or score out of contract;
CSV globs and model scores per batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fairengine.errors import DataContractError
from fairengine.roles import ColumnRoles
from fairengine.streaming import stream_counts

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
    folder.mkdir(exist_ok=True)
    for i, f in enumerate(frames):
        pq.write_table(
            pa.Table.from_pandas(f, preserve_index=False), folder / f"part-{i:05d}.parquet"
        )


def test_missing_column_names_the_file(tmp_path: Path) -> None:
    parts = [frame(1000, s) for s in range(5)]
    parts[3] = parts[3].drop(columns="race")
    write(tmp_path, parts)
    with pytest.raises(
        DataContractError, match=r"part-00003\.parquet: missing column\(s\) \['race'\]"
    ):
        stream_counts(tmp_path, ROLES, threshold=0.5)


def test_other_dtype_names_the_file(tmp_path: Path) -> None:
    parts = [frame(1000, s) for s in range(5)]
    parts[2]["score"] = parts[2]["score"].astype(str)
    write(tmp_path, parts)
    with pytest.raises(
        DataContractError,
        match=r"part-00002\.parquet: column 'score' has type (large_)?string, the other files "
        "have double",
    ):
        stream_counts(tmp_path, ROLES, threshold=0.5)


def test_null_protected_in_one_partition(tmp_path: Path) -> None:
    df = frame(6000)
    df.loc[[10, 20, 30], "race"] = None
    hive = tmp_path / "hive"
    pq.write_to_dataset(
        pa.Table.from_pandas(df, preserve_index=False), hive, partition_cols=["sex"]
    )
    with pytest.raises(
        DataContractError, match=r"sex=[fm]/.*\.parquet, batch 0: \d row\(s\) with a null 'race'"
    ) as err:
        stream_counts(hive, ROLES, threshold=0.5)
    assert "Traceback" not in str(err.value)


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        (
            "score",
            1.5,
            r"part-00001\.parquet, batch 0: score column 'score' is declared "
            "score_type='probability' but 1 value",
        ),
        ("y", 2, r"part-00001\.parquet, batch 0: label column 'y' must be binary; found 3"),
    ],
)
def test_values_out_of_contract(tmp_path: Path, column: str, value: float, message: str) -> None:
    parts = [frame(500, s) for s in range(3)]
    parts[1].loc[7, column] = value
    write(tmp_path, parts)
    with pytest.raises(DataContractError, match=message):
        stream_counts(tmp_path, ROLES, threshold=0.5)


def test_label_values_across_files(tmp_path: Path) -> None:
    parts = [frame(500, s) for s in range(3)]
    parts[2]["y"] = parts[2]["y"].replace(1, 2)  # {0, 2} here, {0, 1} elsewhere
    write(tmp_path, parts)
    with pytest.raises(DataContractError, match="over all files it has 3 distinct values"):
        stream_counts(tmp_path, ROLES, threshold=0.5)


def test_csv_glob(tmp_path: Path) -> None:
    df = frame(3000)
    for i, lo in enumerate(range(0, 3000, 1000)):
        df.iloc[lo : lo + 1000].to_csv(tmp_path / f"part-{i}.csv", index=False)
    counts = stream_counts(str(tmp_path / "*.csv"), ROLES, threshold=0.5, batch_rows=400)
    assert counts.n_rows == 3000 and counts.categories["race"] == ("a", "b", "c")
    assert counts.group_sizes("race").tolist() == df["race"].value_counts().sort_index().tolist()


def test_model_scores_per_batch(tmp_path: Path) -> None:
    df = frame(4000)
    write(tmp_path, [df.iloc[:2500], df.iloc[2500:]])
    roles = ColumnRoles(label="y", protected=("race", "sex"), features=("x",))

    def predict_proba(x: pd.DataFrame) -> np.ndarray:
        p = 1 / (1 + np.exp(-x["x"].to_numpy()))
        return np.column_stack([1 - p, p])

    counts = stream_counts(tmp_path, roles, model=predict_proba, threshold=0.5, batch_rows=1000)
    positives = (1 / (1 + np.exp(-df["x"])) >= 0.5).sum()
    assert counts.has_scores and counts.grid["wp"].sum() == positives
