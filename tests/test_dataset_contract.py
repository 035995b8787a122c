"""The audit-dataset contract (fairengine.dataset) and the CSV/Parquet loaders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.loaders import read_table
from fairengine.roles import ColumnRoles

ROLES = ColumnRoles(label="y", protected=("sex",), score="p")


def frame(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "sex": rng.choice(["female", "male"], n),
            "race": rng.choice(["a", "b", "c"], n),
            "y": rng.integers(0, 2, n),
            "p": rng.random(n),
            "x": rng.normal(size=n),
        }
    )


def build(df: pd.DataFrame, roles: ColumnRoles = ROLES, **kw) -> AuditDataset:
    return AuditDataset.from_frame(df, roles, **kw)


def test_valid_frame_builds_arrays_and_summary() -> None:
    df = frame()
    ds = build(df, ColumnRoles("y", ("sex", "race"), score="p"), threshold=0.5)
    assert ds.n_rows == 200
    np.testing.assert_array_equal(ds.label, df["y"].to_numpy())
    np.testing.assert_array_equal(ds.prediction, (df["p"] > 0.5).astype(float))
    assert ds.groups["race"].categories == ("a", "b", "c")
    assert ds.feature_columns == ("x",)
    s = ds.summary()
    assert s["groups"]["sex"] == df["sex"].value_counts().sort_index().to_dict()
    assert len(s["fingerprint"]) == 64


def test_group_codes_in_the_smallest_unsigned_type() -> None:
    df = frame(600)
    df["many"] = np.arange(600) % 300
    ds = build(df, ColumnRoles(label="y", protected=("sex", "race", "many"), score="p"))
    assert ds.groups["sex"].codes.dtype == np.uint8
    assert ds.groups["race"].codes.dtype == np.uint8
    assert ds.groups["many"].codes.dtype == np.uint16
    np.testing.assert_array_equal(ds.groups["many"].codes, np.arange(600) % 300)
    assert ds.groups["race"].sizes().sum() == 600


def test_fingerprint_depends_on_content_not_identity() -> None:
    a, b = build(frame()), build(frame())
    assert a.fingerprint() == b.fingerprint()
    df = frame()
    df.loc[0, "p"] = 0.123456
    assert build(df).fingerprint() != a.fingerprint()


def test_missing_column_names_it_and_lists_available() -> None:
    with pytest.raises(DataContractError, match=r"missing column\(s\) \['gender'\].*'sex'"):
        build(frame(), ColumnRoles("y", ("gender",), score="p"))


def test_label_not_binary() -> None:
    df = frame()
    df.loc[:5, "y"] = 2
    with pytest.raises(DataContractError, match=r"label column 'y' must be binary; found 3"):
        build(df)


def test_string_labels_need_positive_label() -> None:
    df = frame()
    df["y"] = np.where(df["y"] == 1, ">50K", "<=50K")
    with pytest.raises(DataContractError, match="positive_label"):
        build(df)
    ds = build(df, positive_label=">50K")
    np.testing.assert_array_equal(ds.label, (df["y"] == ">50K").astype(int))


def test_boolean_label_and_group_columns() -> None:
    df = frame()
    df["y"] = df["y"].astype(bool)
    df["flag"] = df["sex"] == "female"
    ds = build(df, ColumnRoles("y", ("flag",), score="p"))
    assert ds.groups["flag"].categories == ("False", "True")
    assert ds.label.sum() == df["y"].sum()


def test_nan_in_protected_attribute() -> None:
    df = frame()
    df.loc[7, "sex"] = None
    with pytest.raises(
        DataContractError,
        match=r"protected attribute 'sex' has 1 missing value\(s\) \(first at row 7\)",
    ):
        build(df)


def test_probability_outside_unit_interval() -> None:
    df = frame()
    df.loc[3, "p"] = 1.2
    df.loc[4, "p"] = -0.1
    with pytest.raises(
        DataContractError, match=r"score column 'p'.*2 value\(s\) lie outside \[0, 1\]"
    ):
        build(df)
    # the same values are fine as raw logits
    assert build(df, score_type="raw").probability is not None


def test_non_numeric_score() -> None:
    df = frame()
    df["p"] = df["p"].astype(str)
    with pytest.raises(DataContractError, match="score column 'p' must be numeric"):
        build(df)


def test_messages_show_a_few_distinct_short_values_of_the_column() -> None:
    df = frame()
    long_text = "x" * 500
    df["p"] = ["high"] * 100 + ["low"] * 50 + [long_text] * 50
    with pytest.raises(DataContractError) as err:
        build(df)
    msg = str(err.value)
    assert "e.g. ['high', 'low', 'xxx" in msg and msg.count("'high'") == 1
    assert long_text not in msg and "…" in msg


def test_single_valued_protected_attribute() -> None:
    df = frame()
    df["sex"] = "female"
    with pytest.raises(DataContractError, match="'sex' has a single value 'female'"):
        build(df)


def test_group_below_minimum_size() -> None:
    df = frame()
    df.loc[:2, "sex"] = "other"
    with pytest.raises(DataContractError, match=r"below the minimum size 30: 'other' \(n=3\)"):
        build(df, min_group_size=30)


def test_continuous_protected_attribute_rejected() -> None:
    df = frame()
    df["age"] = np.random.default_rng(1).uniform(18, 80, len(df))
    with pytest.raises(DataContractError, match="'age' is continuous"):
        build(df, ColumnRoles("y", ("age",), score="p"))


def test_empty_frame() -> None:
    with pytest.raises(DataContractError, match="no rows"):
        build(frame().iloc[:0])


def test_bad_weights() -> None:
    df = frame()
    df["w"] = 1.0
    df.loc[0, "w"] = -1.0
    with pytest.raises(
        DataContractError, match="weight column 'w' must be finite and non-negative"
    ):
        build(df, ColumnRoles("y", ("sex",), score="p", weight="w"))


def test_role_used_twice() -> None:
    with pytest.raises(DataContractError, match="more than one role"):
        ColumnRoles("y", ("y",), score="p")


def test_bad_threshold_and_score_type() -> None:
    with pytest.raises(DataContractError, match="threshold must lie in"):
        build(frame(), threshold=1.5)
    with pytest.raises(DataContractError, match="score_type must be one of"):
        build(frame(), score_type="logit")


# ---------------------------------------------------------------- loaders
def test_read_csv_and_parquet_roundtrip(tmp_path) -> None:
    df = frame(50)
    df.to_csv(tmp_path / "d.csv", index=False)
    df.to_parquet(tmp_path / "d.parquet", index=False)
    pd.testing.assert_frame_equal(read_table(tmp_path / "d.csv"), df, check_dtype=False)
    pd.testing.assert_frame_equal(read_table(tmp_path / "d.parquet"), df)


def test_read_empty_file(tmp_path) -> None:
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataContractError, match=r"empty \(0 bytes\)"):
        read_table(tmp_path / "empty.csv")
    (tmp_path / "header.csv").write_text("y,sex,p\n")
    with pytest.raises(DataContractError, match=r"has a header .* but no rows"):
        read_table(tmp_path / "header.csv")


def test_read_missing_and_unknown_format(tmp_path) -> None:
    with pytest.raises(DataContractError, match="does not exist"):
        read_table(tmp_path / "nope.csv")
    (tmp_path / "d.txt").write_text("a\n1\n")
    with pytest.raises(DataContractError, match="cannot tell the format"):
        read_table(tmp_path / "d.txt")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(DataContractError, match=r"could not read .* as parquet"):
        read_table(tmp_path / "bad.parquet")
