"""Tests of the Great Expectations data-validation step (tasks/validate.py).

Each test validates a small frame in a fresh ephemeral GX context (~0.2 s each; the GX import,
~4 s, is paid once). The Prefect task is exercised through ``validate_data.fn`` (no flow run).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from fairengine.errors import DataContractError, DataValidationError
from fairengine.results import ExpectationOutcome, ValidationResult
from fairengine.roles import ColumnRoles
from tasks.validate import raise_if_invalid, validate_data, validate_frame

N = 240  # 2 sexes x 120 rows, 3 races x 80 rows: every group clears min_group_size=30

ROLES = ColumnRoles(label="y", protected=("sex", "race"), score="s", weight="w")


def make_frame(n: int = N, seed: int = 0) -> pd.DataFrame:
    """A clean audit table: binary label, two protected attributes, probability scores, weights."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "y": rng.integers(0, 2, n),
            "sex": np.array(["F", "M"])[np.arange(n) % 2],
            "race": np.array(["A", "B", "C"])[np.arange(n) % 3],
            "s": rng.random(n),
            "w": rng.random(n) + 0.5,
            "x1": rng.normal(size=n),
        }
    )


def failed(result: ValidationResult) -> list[ExpectationOutcome]:
    """The failed checks of ``result``."""
    return [e for e in result.expectations if not e.success]


def only_failure(result: ValidationResult) -> ExpectationOutcome:
    """The single failed check of ``result`` (the test fails if there are more or none)."""
    bad = failed(result)
    assert len(bad) == 1, [e.description for e in bad]
    return bad[0]


def error_of(result: ValidationResult) -> DataValidationError:
    """The :class:`DataValidationError` that :func:`raise_if_invalid` raises for ``result``."""
    with pytest.raises(DataValidationError) as info:
        raise_if_invalid(result)
    return info.value


# --- a clean table ---------------------------------------------------------------------------


def test_clean_frame_passes_and_lists_every_expectation() -> None:
    frame = make_frame()
    roles = ColumnRoles(
        label="y", protected=("sex", "race"), score="s", weight="w", features=("x1",)
    )
    result = validate_frame(frame, roles)
    assert result.success, [e.description for e in failed(result)]
    assert result.n_rows == N
    assert result.engine.startswith("great_expectations 1.")
    raise_if_invalid(result)  # no exception

    checks = {(e.expectation, e.column) for e in result.expectations}
    expected = {
        ("expect_table_row_count_to_be_between", None),
        *{("expect_column_to_exist", c) for c in ("y", "sex", "race", "s", "w", "x1")},
        *{("expect_column_values_to_not_be_null", c) for c in ("y", "sex", "race", "s", "w")},
        ("expect_column_values_to_be_in_set", "y"),
        ("expect_column_unique_value_count_to_be_between", "sex"),
        ("expect_column_unique_value_count_to_be_between", "race"),
        ("expect_column_values_to_be_in_set", "sex"),
        ("expect_column_values_to_be_in_set", "race"),
        ("expect_column_values_to_be_in_type_list", "s"),
        ("expect_column_values_to_be_between", "s"),
        ("expect_column_values_to_be_in_type_list", "w"),
        ("expect_column_values_to_be_between", "w"),
    }
    assert checks == expected
    assert len(result.expectations) == len(expected)
    descriptions = [e.description for e in result.expectations]
    assert descriptions[0] == "the table has at least 1 row"
    assert "label column 'y' contains only the values {0, 1}" in descriptions
    assert "score column 's' (score_type='probability') lies within [0, 1]" in descriptions
    assert "every group of protected attribute 'race' has at least 30 rows" in descriptions
    assert all(" — " not in d for d in descriptions)  # nothing "found" on success


def test_validate_data_task_returns_the_result_for_clean_data() -> None:
    result = validate_data.fn(make_frame(), ROLES, score_type="probability", min_group_size=30)
    assert isinstance(result, ValidationResult)
    assert result.success


def test_no_progress_bars_or_gx_chatter_on_the_console(capfd: pytest.CaptureFixture[str]) -> None:
    validate_frame(make_frame(), ROLES)
    err = capfd.readouterr().err
    assert "Calculating Metrics" not in err
    assert "ephemeral docs site" not in err


def test_nullable_and_boolean_dtypes_pass() -> None:
    frame = make_frame()
    frame["y"] = frame["y"].astype(bool)
    frame["s"] = frame["s"].astype("Float64")
    frame["w"] = pd.array(np.arange(N) % 3 + 1, dtype="Int64")
    frame["race"] = frame["race"].astype("category")
    result = validate_frame(frame, ROLES)
    assert result.success, [e.description for e in failed(result)]


@pytest.mark.parametrize("dtype", ["int64", "float64", "Int64", "Float64", "int32", "float32"])
def test_numeric_score_dtypes_pass_the_type_check(dtype: str) -> None:
    frame = make_frame()
    frame["s"] = (frame["s"] > 0.5).astype(dtype)
    result = validate_frame(frame, ROLES)
    assert result.success, [e.description for e in failed(result)]


def test_string_labels_with_a_declared_positive_label() -> None:
    frame = make_frame()
    frame["y"] = np.where(frame["y"] == 1, "yes", "no")
    assert validate_frame(frame, ROLES, positive_label="yes").success

    frame.loc[:4, "y"] = "maybe"
    bad = only_failure(validate_frame(frame, ROLES, positive_label="yes"))
    assert bad.column == "y"
    assert bad.expectation == "expect_column_unique_value_count_to_be_between"
    assert "label column 'y'" in bad.description
    assert "found 3 distinct values" in bad.description


# --- one problem at a time --------------------------------------------------------------------


def _drop(col: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda f: f.drop(columns=[col])


def _label_012(f: pd.DataFrame) -> pd.DataFrame:
    f.loc[[0, 5, 9], "y"] = 2
    return f


def _nan_protected(f: pd.DataFrame) -> pd.DataFrame:
    f["race"] = f["race"].astype(object)
    f.loc[[3, 7], "race"] = np.nan
    return f


def _prob_out_of_range(f: pd.DataFrame) -> pd.DataFrame:
    f.loc[0, "s"] = 1.2
    f.loc[1, "s"] = -0.1
    return f


def _string_score(f: pd.DataFrame) -> pd.DataFrame:
    f["s"] = f["s"].astype(object)
    f.loc[4, "s"] = "abc"
    return f


def _single_value(f: pd.DataFrame) -> pd.DataFrame:
    f["sex"] = "F"
    return f


def _negative_weights(f: pd.DataFrame) -> pd.DataFrame:
    f.loc[[2, 3], "w"] = [-1.0, -0.5]
    return f


@pytest.mark.parametrize(
    ("mutate", "expectation", "column", "fragments"),
    [
        pytest.param(
            _drop("y"),
            "expect_column_to_exist",
            "y",
            ["label column 'y' exists", "column 'y' not found", "'sex'"],
            id="label-missing",
        ),
        pytest.param(
            _drop("race"),
            "expect_column_to_exist",
            "race",
            ["protected attribute column 'race' exists", "column 'race' not found"],
            id="protected-missing",
        ),
        pytest.param(
            _label_012,
            "expect_column_values_to_be_in_set",
            "y",
            ["label column 'y' contains only the values {0, 1}", "found 3 rows", "e.g. [2]"],
            id="label-not-binary",
        ),
        pytest.param(
            _nan_protected,
            "expect_column_values_to_not_be_null",
            "race",
            ["'race' has no missing values", "found 2 missing values", "rows [3, 7]"],
            id="nan-in-protected",
        ),
        pytest.param(
            _prob_out_of_range,
            "expect_column_values_to_be_between",
            "s",
            ["score column 's'", "[0, 1]", "found 2 values outside [0, 1]", "1.2", "-0.1"],
            id="probability-out-of-range",
        ),
        pytest.param(
            _string_score,
            "expect_column_values_to_be_in_type_list",
            "s",
            ["score column 's' is numeric", "not a numeric dtype", "'abc'"],
            id="string-score",
        ),
        pytest.param(
            _single_value,
            "expect_column_unique_value_count_to_be_between",
            "sex",
            ["protected attribute 'sex' has at least 2 distinct values", "found 1 distinct value"],
            id="single-valued-protected",
        ),
        pytest.param(
            _negative_weights,
            "expect_column_values_to_be_between",
            "w",
            ["weight column 'w'", "non-negative", "found 2 negative", "-1.0", "-0.5"],
            id="negative-weights",
        ),
    ],
)
def test_each_bad_input_fails_one_check_naming_column_and_problem(
    mutate: Callable[[pd.DataFrame], pd.DataFrame],
    expectation: str,
    column: str,
    fragments: list[str],
) -> None:
    result = validate_frame(mutate(make_frame()), ROLES)
    assert not result.success
    bad = only_failure(result)
    assert (bad.expectation, bad.column) == (expectation, column)
    for fragment in fragments:
        assert fragment in bad.description, bad.description

    err = error_of(result)
    n = len(result.expectations)
    assert str(err).startswith(f"Data validation failed: 1 of {n} checks failed:")
    assert err.failures == [bad.description]
    assert bad.description in str(err)


def test_missing_column_gets_no_further_checks() -> None:
    result = validate_frame(make_frame().drop(columns=["race"]), ROLES)
    on_race = [e.expectation for e in result.expectations if e.column == "race"]
    assert on_race == ["expect_column_to_exist"]


def test_raw_score_with_infinity() -> None:
    frame = make_frame()
    frame["s"] = np.log(frame["s"] / (1 - frame["s"]))  # logits: outside [0, 1], all finite
    assert validate_frame(frame, ROLES, score_type="raw").success
    frame.loc[[0, 1], "s"] = [np.inf, -np.inf]
    result = validate_frame(frame, ROLES, score_type="raw")
    bad = only_failure(result)
    assert (bad.expectation, bad.column) == ("expect_column_values_to_be_between", "s")
    assert "score column 's' (score_type='raw') is finite" in bad.description
    assert "found 2 infinite values" in bad.description
    assert bad.unexpected_count == 2
    assert "inf" in str(bad.unexpected_examples)
    assert "finite" in str(error_of(result))


def test_small_groups_are_named_with_their_sizes() -> None:
    frame = make_frame()
    frame.loc[:4, "race"] = "Other"  # 5 rows
    frame.loc[5:16, "race"] = "Amer"  # 12 rows
    result = validate_frame(frame, ROLES, min_group_size=30)
    bad = only_failure(result)
    assert (bad.expectation, bad.column) == ("expect_column_values_to_be_in_set", "race")
    assert (
        "groups below the minimum size 30 in 'race': 'Other' (n=5), 'Amer' (n=12)"
        in bad.description
    )
    assert bad.unexpected_count == 17  # the rows of the small groups
    assert set(bad.unexpected_examples) == {"Other", "Amer"}
    assert bad.observed == {"Other": 5, "Amer": 12}
    assert validate_frame(frame, ROLES, min_group_size=5).success


def test_empty_frame_fails_the_row_count() -> None:
    frame = make_frame().iloc[:0]
    result = validate_frame(frame, ROLES)
    assert not result.success
    assert result.n_rows == 0
    row_check = result.expectations[0]
    assert row_check.expectation == "expect_table_row_count_to_be_between"
    assert not row_check.success
    assert "the table has at least 1 row — found 0 rows" in row_check.description
    assert "found 0 rows" in str(error_of(result))


# --- several problems at once --------------------------------------------------------------------


def test_two_problems_are_both_listed() -> None:
    frame = _negative_weights(_label_012(make_frame()))
    result = validate_frame(frame, ROLES)
    err = error_of(result)
    msg = str(err)
    n = len(result.expectations)
    assert msg.startswith(f"Data validation failed: 2 of {n} checks failed:")
    assert len(err.failures) == 2
    assert "label column 'y'" in err.failures[0]
    assert "weight column 'w'" in err.failures[1]
    assert all(f in msg for f in err.failures)
    assert msg.count("\n") == 2  # the header, then one line per failure


def test_missing_label_and_protected_nan_together() -> None:
    frame = _nan_protected(make_frame()).drop(columns=["y"])
    with pytest.raises(DataValidationError) as info:
        validate_data.fn(frame, ROLES)
    err = info.value
    assert len(err.failures) == 2
    assert "column 'y' not found" in err.failures[0]
    assert "'race' has no missing values — found 2 missing values" in err.failures[1]


# --- odd input never crashes ---------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(
            pd.DataFrame({c: [None] * 40 for c in ("y", "sex", "race", "s", "w")}), id="all-null"
        ),
        pytest.param(
            pd.DataFrame(
                {
                    "y": [0, "1"] * 20,
                    "sex": [1, "a"] * 20,
                    "race": [[1], [2]] * 20,  # unhashable values
                    "s": [0.5, "x"] * 20,
                    "w": [1, "2"] * 20,
                }
            ),
            id="mixed-object",
        ),
        pytest.param(
            pd.DataFrame(
                [[0, "a", "b", 0.5, 1.0, 1]] * 40, columns=["y", "sex", "race", "s", "w", "y"]
            ),
            id="duplicate-column-names",
        ),
        pytest.param(
            pd.DataFrame({"y": [], "sex": [], "race": [], "s": [], "w": []}),
            id="empty-untyped",
        ),
    ],
)
def test_odd_input_gives_failed_checks_not_exceptions(frame: pd.DataFrame) -> None:
    result = validate_frame(frame, ROLES)
    assert not result.success
    assert all(e.description for e in result.failures)
    json.dumps(result.to_dict(), allow_nan=False)
    assert str(error_of(result)).startswith("Data validation failed:")


def test_duplicate_column_names_are_reported() -> None:
    frame = pd.DataFrame(
        [[0, "a", "b", 0.5, 1.0, 1]] * 40, columns=["y", "sex", "race", "s", "w", "y"]
    )
    bad = [e for e in validate_frame(frame, ROLES).failures if e.column == "y"]
    assert len(bad) == 1
    assert "2 columns named 'y'" in bad[0].description


# --- contracts ---------------------------------------------------------------------------------


def test_result_is_strict_json_and_round_trips() -> None:
    frame = _prob_out_of_range(_nan_protected(make_frame()))
    frame.loc[10, "s"] = np.nan
    result = validate_frame(frame, ROLES)
    text = json.dumps(result.to_dict(), allow_nan=False)
    back = ValidationResult.from_dict(json.loads(text))
    assert back.success is False
    assert [e.description for e in back.expectations] == [
        e.description for e in result.expectations
    ]
    json.dumps(validate_frame(make_frame(), ROLES).to_dict(), allow_nan=False)


def test_input_frame_is_not_modified() -> None:
    frame = _label_012(make_frame())
    before = frame.copy()
    validate_frame(frame, ROLES)
    pd.testing.assert_frame_equal(frame, before)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"score_type": "logit"}, "score_type"),
        ({"min_group_size": 0}, "min_group_size"),
    ],
)
def test_invalid_arguments_raise_contract_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(DataContractError, match=message):
        validate_frame(make_frame(), ROLES, **kwargs)  # type: ignore[arg-type]
