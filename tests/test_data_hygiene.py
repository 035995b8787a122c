"""Data hygiene on the way in (fairengine.loaders, fairengine.data_hygiene, tasks.data).

The expectations on the real UCI Adult and COMPAS files of ../shared/data are computed
independently here with the plain :mod:`csv` module, never with the code under test.
"""

from __future__ import annotations

import csv
import gzip
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.config import AuditConfig
from fairengine.data_hygiene import clean_role_columns
from fairengine.dataset import AuditDataset
from fairengine.datasets.adult import COLUMNS as ADULT_COLUMNS
from fairengine.errors import ConfigError, DataContractError
from fairengine.loaders import DataHygieneWarning, load_table, read_table
from fairengine.roles import ColumnRoles
from tasks.data import LoadedData, resolve_data

ADULT_ROLES = {"label": "income", "protected": ["sex", "race", "native_country"]}


@pytest.fixture(scope="module")
def adult_file(shared_dir: Path) -> Path:
    return shared_dir / "data" / "adult" / "adult.data.gz"


@pytest.fixture(scope="module")
def adult_rows(adult_file: Path) -> list[list[str]]:
    """The raw fields of adult.data, exactly as written (leading spaces kept)."""
    with gzip.open(adult_file, "rt", newline="") as fh:
        return [r for r in csv.reader(fh) if r]


def load(data: dict, columns: dict, base_dir: Path | None = None, **top) -> LoadedData:
    cfg = AuditConfig.from_dict({"data": data, "columns": columns, **top}, base_dir=base_dir)
    return resolve_data(cfg)


def adult_data(adult_file: Path, **extra) -> dict:
    return {"path": str(adult_file), "format": "csv", "names": list(ADULT_COLUMNS), **extra}


def write_csv(path: Path, header: list[str] | None, rows: list[list[str]], sep: str = ",") -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, delimiter=sep)
        if header is not None:
            w.writerow(header)
        w.writerows(rows)
    return path


def col(name: str) -> int:
    return ADULT_COLUMNS.index(name)


# ---------------------------------------------------------------- Adult: missing markers
def test_adult_question_marks_in_role_columns_are_an_error_with_counts(
    adult_file: Path, adult_rows: list[list[str]]
) -> None:
    n_q = {c: sum(r[col(c)].strip() == "?" for r in adult_rows) for c in ADULT_ROLES["protected"]}
    assert n_q["native_country"] > 0 and n_q["sex"] == 0  # the raw file's facts
    with pytest.raises(DataContractError) as err:
        load(adult_data(adult_file), ADULT_ROLES, positive_label=">50K")
    msg = str(err.value)
    assert f"protected attribute 'native_country': {n_q['native_country']} of " in msg
    assert f"of {len(adult_rows)} rows ('?': {n_q['native_country']})" in msg
    assert "'sex':" not in msg and "label column" not in msg  # clean columns are not named
    assert "data.missing: drop" in msg


def test_adult_error_lists_every_column_with_missing_values(
    adult_file: Path, adult_rows: list[list[str]]
) -> None:
    roles = {"label": "income", "protected": ["workclass", "occupation", "sex"]}
    with pytest.raises(DataContractError) as err:
        load(adult_data(adult_file), roles, positive_label=">50K")
    for c in ("workclass", "occupation"):
        n = sum(r[col(c)].strip() == "?" for r in adult_rows)
        assert f"protected attribute {c!r}: {n} of {len(adult_rows)} rows ('?': {n})" in str(
            err.value
        )


def test_adult_missing_drop_drops_exactly_the_question_mark_rows(
    adult_file: Path, adult_rows: list[list[str]]
) -> None:
    roles = {"label": "income", "protected": ["sex", "native_country", "workclass"]}
    role_idx = [col(c) for c in ("income", "sex", "native_country", "workclass")]
    expected = sum(any(r[i].strip() == "?" for i in role_idx) for r in adult_rows)
    # rows with '?' in both native_country and workclass are dropped once, not twice
    both = sum(
        r[col("native_country")].strip() == "?" and r[col("workclass")].strip() == "?"
        for r in adult_rows
    )
    assert both > 0
    loaded = load(adult_data(adult_file, missing="drop"), roles, positive_label=">50K")
    assert loaded.dropped_rows == expected
    assert len(loaded.frame) == len(adult_rows) - expected
    assert isinstance(loaded.frame.index, pd.RangeIndex)
    assert not loaded.frame[["sex", "native_country", "workclass"]].isin(["?"]).any().any()
    dropped = [w for w in loaded.warnings if w.startswith("dropped")]
    assert len(dropped) == 1 and f"dropped {expected} of {len(adult_rows)} rows" in dropped[0]
    # what is left is exactly the rows without '?' in a role column, in file order
    kept = [r for r in adult_rows if not any(r[i].strip() == "?" for i in role_idx)]
    assert loaded.frame["age"].tolist() == [int(r[col("age")]) for r in kept]
    # features keep their text, less the space after each ", " delimiter
    assert loaded.frame["education"].iloc[0] == kept[0][col("education")][1:]


def test_adult_whitespace_is_stripped_with_a_warning_and_groups_use_stripped_names(
    adult_file: Path, adult_rows: list[list[str]]
) -> None:
    roles = {"label": "income", "protected": ["sex", "race"]}
    loaded = load(adult_data(adult_file, skip_initial_space=False), roles, positive_label=">50K")
    assert loaded.dropped_rows == 0
    for c in ("income", "sex", "race"):
        changed = sum(r[col(c)] != r[col(c)].strip() for r in adult_rows)
        assert changed > 0
        notes = [w for w in loaded.warnings if f"{c!r}: stripped" in w]
        assert len(notes) == 1 and f"from {changed} value(s)" in notes[0]
    ds = AuditDataset.from_frame(
        loaded.frame, loaded.roles, positive_label=">50K", min_group_size=1
    )
    for c in ("sex", "race"):
        assert set(ds.groups[c].categories) == {r[col(c)].strip() for r in adult_rows}
        sizes = dict(zip(ds.groups[c].categories, ds.groups[c].sizes(), strict=True))
        assert sizes == dict(Counter(r[col(c)].strip() for r in adult_rows))
    positives = sum(r[col("income")].strip() == ">50K" for r in adult_rows)
    assert int(ds.label.sum()) == positives


def test_adult_comma_space_fields_are_read_without_the_space_features_included(
    adult_file: Path, adult_rows: list[list[str]]
) -> None:
    """Raw adult.data separates fields with ', ': detected, the space dropped from every column
    (a model trained on the documented values must see 'State-gov', not ' State-gov'), said in a
    warning; text markers left in feature columns are counted in warnings; false keeps it."""
    roles = {"label": "income", "protected": ["sex", "race"]}
    loaded = load(adult_data(adult_file), roles, positive_label=">50K")
    frame = loaded.frame
    assert list(frame["workclass"]) == [r[col("workclass")][1:] for r in adult_rows]
    assert [w for w in loaded.warnings if "and a space" in w and "skip_initial_space" in w]
    assert not [w for w in loaded.warnings if ": stripped" in w]  # nothing left to strip
    for feature in ("workclass", "occupation", "native_country"):
        n = sum(r[col(feature)].strip() == "?" for r in adult_rows)
        assert n > 0
        notes = [w for w in loaded.warnings if f"feature column {feature!r} holds {n} " in w]
        assert len(notes) == 1, loaded.warnings
    kept = load(adult_data(adult_file, skip_initial_space=False), roles, positive_label=">50K")
    assert list(kept.frame["workclass"]) == [r[col("workclass")] for r in adult_rows]


def test_adult_repeated_header_name_is_an_error_naming_both_positions(
    adult_file: Path, adult_rows: list[list[str]], tmp_path: Path
) -> None:
    header = list(ADULT_COLUMNS)
    header[col("race")] = "sex"  # 'sex' twice: columns 9 and 10 (from 1)
    path = write_csv(tmp_path / "adult_dup.csv", header, adult_rows[:500])
    with pytest.raises(DataContractError) as err:
        load({"path": str(path)}, {"label": "income", "protected": ["sex"]})
    assert f"'sex' at columns {col('race') + 1}, {col('sex') + 1}" in str(err.value)


def test_repeated_header_with_identical_values_keeps_one_copy_with_a_warning(
    tmp_path: Path,
) -> None:
    rows = [[str(i % 2), "ab"[i % 3 == 0], str(i % 2)] for i in range(60)]
    path = write_csv(tmp_path / "d.csv", ["y", "s", "y"], rows)
    loaded = load({"path": str(path)}, {"label": "y", "protected": ["s"]})
    assert list(loaded.frame.columns) == ["y", "s"]
    assert any("'y' appears 2 times" in w and "columns 1, 3" in w for w in loaded.warnings)


def test_adult_names_must_match_the_field_count_and_not_repeat_a_header(
    adult_file: Path, tmp_path: Path
) -> None:
    with pytest.raises(DataContractError, match=r"data.names gives 14 column names .* 15 fields"):
        load({"path": str(adult_file), "format": "csv", "names": list(ADULT_COLUMNS[:-1])},
             ADULT_ROLES)  # fmt: skip
    path = write_csv(tmp_path / "h.csv", ["y", "s"], [["1", "a"], ["0", "b"]])
    with pytest.raises(DataContractError, match=r"has a header row; remove data\.names"):
        load({"path": str(path), "names": ["y", "s"]}, {"label": "y", "protected": ["s"]})


def test_adult_test_file_opens_with_a_note_skip_rows_reads_it_exactly(shared_dir: Path) -> None:
    """UCI's adult.test starts with the line '|1x3 Cross validator': without data.skip_rows the
    error says that the lines after it split into 15 fields and what to set; with
    ``skip_rows: 1`` every data row is read, exactly as the csv module reads lines 2 onwards,
    and its labels keep their trailing dot ('>50K.'), which positive_label must name."""
    path = shared_dir / "data" / "adult" / "adult.test.gz"
    with gzip.open(path, "rt", newline="") as fh:
        first = fh.readline()
        rows = [r for r in csv.reader(fh) if r]
    assert first.startswith("|1x3")
    data = {"path": str(path), "format": "csv", "names": list(ADULT_COLUMNS)}
    roles = {"label": "income", "protected": ["sex", "race"]}
    with pytest.raises(DataContractError, match=r"set data\.skip_rows: 1"):
        load(data, roles, positive_label=">50K.")
    loaded = load({**data, "skip_rows": 1, "missing": "drop"}, roles, positive_label=">50K.")
    kept = [r for r in rows if "?" not in (r[col("sex")].strip(), r[col("race")].strip())]
    assert len(loaded.frame) == len(kept) == len(rows)  # no '?' in these role columns
    assert Counter(loaded.frame["income"]) == Counter(r[col("income")].strip() for r in rows)
    assert loaded.frame["age"].tolist() == [int(r[col("age")]) for r in rows]
    assert set(loaded.frame["income"]) == {"<=50K.", ">50K."}


@pytest.mark.parametrize("bad", [-1, 1.5, "1", True])
def test_skip_rows_must_be_a_whole_number_of_lines(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"data\.skip_rows'? must be"):
        AuditConfig.from_dict(
            {
                "data": {"path": "x.csv", "skip_rows": bad},
                "columns": {"label": "y", "protected": ["s"]},
            }
        )


def test_skip_rows_with_a_header_and_on_parquet(tmp_path: Path) -> None:
    """A title line above a header row is skipped and the header read; Parquet has no lines."""
    path = tmp_path / "titled.csv"
    path.write_text("Loan decisions, export of 2026-11-27\ny,s\n1,a\n0,b\n1,b\n")
    loaded = load({"path": str(path), "skip_rows": 1}, {"label": "y", "protected": ["s"]})
    assert list(loaded.frame.columns) == ["y", "s"] and len(loaded.frame) == 3
    pq = tmp_path / "t.parquet"
    pd.DataFrame({"y": [1, 0], "s": ["a", "b"]}).to_parquet(pq)
    with pytest.raises(DataContractError, match=r"data\.skip_rows apply to CSV files"):
        load_table(pq, skip_rows=1)


# ---------------------------------------------------------------- COMPAS
def test_compas_loads_with_only_its_repeated_columns_reported(shared_dir: Path) -> None:
    path = shared_dir / "data" / "compas" / "compas-scores-two-years.csv.gz"
    with gzip.open(path, "rt", newline="") as fh:
        raw = list(csv.reader(fh))
    header, rows = raw[0], [r for r in raw[1:] if r]
    repeated = sorted(n for n, k in Counter(header).items() if k > 1)
    roles = {"label": "two_year_recid", "protected": ["race", "sex"]}
    loaded = load({"path": str(path)}, roles)
    assert len(loaded.frame) == len(rows)
    assert loaded.frame.shape[1] == len(set(header))
    assert len(loaded.warnings) == len(repeated)  # nothing else: no whitespace, no missing
    for name in repeated:
        assert any(f"column {name!r} appears" in w for w in loaded.warnings)
    race = Counter(r[header.index("race")] for r in rows)
    assert loaded.frame["race"].value_counts().to_dict() == dict(race)


# ---------------------------------------------------------------- case variants, delimiters
def test_case_variants_of_a_group_warn_and_stay_separate(tmp_path: Path) -> None:
    values = ["Female"] * 10 + ["female"] * 3 + ["Female "] * 2 + ["Male"] * 12
    rows = [[str(i % 2), v] for i, v in enumerate(values)]
    path = write_csv(tmp_path / "d.csv", ["y", "sex"], rows)
    loaded = load({"path": str(path)}, {"label": "y", "protected": ["sex"]})
    assert loaded.frame["sex"].value_counts().to_dict() == {"Male": 12, "Female": 12, "female": 3}
    case = [w for w in loaded.warnings if "differ only in case" in w]
    assert case == [
        "protected attribute 'sex' has values that differ only in case: 'Female' (n=12), "
        "'female' (n=3); they are audited as separate groups — normalise them if they are the "
        "same group"
    ]
    assert any("'sex': stripped" in w and "from 2 value(s)" in w for w in loaded.warnings)


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_other_delimiters_are_detected_and_reported(tmp_path: Path, sep: str) -> None:
    rows = [[str(i % 2), "ab"[i % 3 == 0], f"{(i % 10) / 10:.1f}"] for i in range(80)]
    path = write_csv(tmp_path / "d.csv", ["y", "sex", "p"], rows, sep=sep)
    loaded = load({"path": str(path)}, {"label": "y", "protected": ["sex"], "score": "p"})
    assert list(loaded.frame.columns) == ["y", "sex", "p"]
    assert loaded.frame["p"].tolist() == [float(r[2]) for r in rows]
    assert any("detected" in w for w in loaded.warnings)
    # named explicitly: no warning
    quiet = load({"path": str(path), "delimiter": sep}, {"label": "y", "protected": ["sex"]})
    assert quiet.warnings == ()
    # the wrong delimiter named: an error that names the right one
    with pytest.raises(DataContractError) as err:
        load({"path": str(path), "delimiter": ","}, {"label": "y", "protected": ["sex"]})
    assert "single column with the delimiter ','" in str(err.value)
    assert repr(sep) in str(err.value) or "tab" in str(err.value)


def test_rows_longer_than_the_header_are_an_error_not_an_index(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("y,sex\n1,a,extra\n0,b,extra\n")
    with pytest.raises(DataContractError, match="more fields than its header"):
        load({"path": str(path)}, {"label": "y", "protected": ["sex"]})


# ---------------------------------------------------------------- paths and messages
def test_path_traversal_error_never_echoes_the_file(tmp_path: Path) -> None:
    target = Path("/etc/passwd")
    if not target.is_file():
        pytest.skip("no /etc/passwd on this machine")
    lines = [ln for ln in target.read_text(errors="replace").splitlines() if ln.strip()]
    base = tmp_path / "a" / "b"
    base.mkdir(parents=True)
    up = "../" * len(base.parts)
    with pytest.raises(DataContractError) as err:
        load({"path": f"{up}etc/passwd", "format": "csv"}, {"label": "y", "protected": ["s"]},
             base_dir=base)  # fmt: skip
    msg = str(err.value)
    assert "'/etc/passwd'" in msg  # resolved against the config's folder, and named
    assert not [ln for ln in lines if ln in msg]
    assert not [f for f in lines[0].split(":") if len(f) > 3 and f in msg.replace("/etc/", "")]


def test_parser_errors_name_the_position_not_the_content(tmp_path: Path) -> None:
    secret = "s3cr3t-value-that-must-not-leak"
    path = tmp_path / "d.csv"
    path.write_text("y,sex\n" + "1,a\n" * 200 + f"1,{secret},{secret},x\n")
    with pytest.raises(DataContractError) as err:
        load({"path": str(path)}, {"label": "y", "protected": ["sex"]})
    assert secret not in str(err.value) and "line 202" in str(err.value)


def test_relative_paths_follow_the_config_file_and_absolute_paths_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    rows = [[str(i % 2), "ab"[i % 2]] for i in range(40)]
    write_csv(folder / "scored.csv", ["y", "sex"], rows)
    (folder / "audit.yaml").write_text(
        "data: {path: scored.csv}\ncolumns: {label: y, protected: [sex]}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = AuditConfig.from_yaml(folder / "audit.yaml")
    assert cfg.data.path == str((folder / "scored.csv").resolve())
    assert len(resolve_data(cfg).frame) == 40
    absolute = load({"path": str(folder / "scored.csv")}, {"label": "y", "protected": ["sex"]},
                    base_dir=elsewhere)  # fmt: skip
    assert len(absolute.frame) == 40


# ---------------------------------------------------------------- markers and types
def test_markers_case_insensitive_with_spaces_and_user_na_values(tmp_path: Path) -> None:
    markers = ["?", " ?", "NA", "n/a", " null ", "None", "nan", "", "missing"]
    rows = [[str(i % 2), m, "0.5"] for i, m in enumerate(markers)]
    rows += [[str(i % 2), "ab"[i % 2], "0.5"] for i in range(40)]
    path = write_csv(tmp_path / "d.csv", ["y", "sex", "p"], rows)
    roles = {"label": "y", "protected": ["sex"], "score": "p"}
    with pytest.raises(DataContractError, match=r"'sex': 8 of 49 rows"):
        load({"path": str(path)}, roles)  # 'missing' is not a default marker
    with pytest.raises(DataContractError, match=r"'sex': 9 of 49 rows.*\['missing'\]"):
        load({"path": str(path), "na_values": ["missing"]}, roles)
    loaded = load({"path": str(path), "na_values": ["MISSING"], "missing": "drop"}, roles)
    assert loaded.dropped_rows == 9 and sorted(loaded.frame["sex"].unique()) == ["a", "b"]


def test_markers_in_numeric_role_columns_and_the_recovered_dtype(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 60
    y = rng.integers(0, 2, n).astype(str).tolist()
    p = [f"{v:.3f}" for v in rng.random(n)]
    w = [str(v) for v in rng.integers(1, 5, n)]
    y[3], p[7], w[11] = " ?", "?", "-999"
    rows = [[a, "ab"[i % 2], b, c] for i, (a, b, c) in enumerate(zip(y, p, w, strict=True))]
    path = write_csv(tmp_path / "d.csv", ["y", "sex", "p", "w"], rows)
    roles = {"label": "y", "protected": ["sex"], "score": "p", "weight": "w"}
    with pytest.raises(DataContractError) as err:
        load({"path": str(path), "na_values": ["-999"]}, roles)
    msg = str(err.value)
    assert "label column 'y': 1 of 60 rows ('?': 1)" in msg
    assert "score column 'p': 1 of 60 rows ('?': 1)" in msg
    assert "weight column 'w': 1 of 60 rows (-999: 1)" in msg
    loaded = load({"path": str(path), "na_values": ["-999"], "missing": "drop"}, roles)
    assert loaded.dropped_rows == 3
    f = loaded.frame
    assert pd.api.types.is_numeric_dtype(f["y"]) and pd.api.types.is_numeric_dtype(f["p"])
    keep = [i for i in range(n) if i not in (3, 7, 11)]
    np.testing.assert_allclose(f["p"].to_numpy(), [float(p[i]) for i in keep])
    ds = AuditDataset.from_frame(f, loaded.roles, min_group_size=1)
    assert int(ds.label.sum()) == sum(y[i] == "1" for i in keep)


def test_parquet_role_columns_are_cleaned_too(tmp_path: Path) -> None:
    df = pd.DataFrame({"y": [0, 1] * 20, "sex": [" a", "b ", "?", "a"] * 10})
    df.to_parquet(tmp_path / "d.parquet")
    with pytest.raises(DataContractError, match=r"'sex': 10 of 40 rows \('\?': 10\)"):
        load({"path": str(tmp_path / "d.parquet")}, {"label": "y", "protected": ["sex"]})
    with pytest.raises(DataContractError, match="apply to CSV files"):
        load({"path": str(tmp_path / "d.parquet"), "delimiter": ";"},
             {"label": "y", "protected": ["sex"]})  # fmt: skip


def test_clean_frame_is_returned_unchanged_without_warnings() -> None:
    df = pd.DataFrame({"y": [0, 1] * 20, "sex": ["a", "b"] * 20, "p": np.linspace(0, 1, 40)})
    out = clean_role_columns(df, ColumnRoles("y", ("sex",), score="p"))
    assert out.warnings == () and out.dropped_rows == 0 and out.missing_counts == {}
    pd.testing.assert_frame_equal(out.frame, df)


def test_dropping_every_row_is_an_error() -> None:
    df = pd.DataFrame({"y": [0, 1, 0], "sex": ["?", "NA", None]})
    with pytest.raises(DataContractError, match="every one of the 3 rows"):
        clean_role_columns(df, ColumnRoles("y", ("sex",)), missing="drop")


def test_read_table_issues_its_notes_as_python_warnings(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "d.csv", ["y", "s"], [["1", "a"], ["0", "b"]], sep=";")
    with pytest.warns(DataHygieneWarning, match="delimiter ';'"):
        frame = read_table(path)
    assert list(frame.columns) == ["y", "s"]
    assert load_table(path, delimiter=";").warnings == ()


def test_data_config_keys_are_validated() -> None:
    base = {"columns": {"label": "y", "protected": ["s"]}}
    with pytest.raises(ConfigError, match=r"data\.missing must be 'error' or 'drop'"):
        AuditConfig.from_dict({"data": {"path": "x.csv", "missing": "skip"}, **base})
    with pytest.raises(ConfigError, match=r"data\.delimiter must be a single character"):
        AuditConfig.from_dict({"data": {"path": "x.csv", "delimiter": ";;"}, **base})
    with pytest.raises(ConfigError, match=r"repeated: \['a'\]"):
        AuditConfig.from_dict({"data": {"path": "x.csv", "names": ["a", "b", "a"]}, **base})
    with pytest.raises(ConfigError, match=r"unknown config key 'data\.na_value'"):
        AuditConfig.from_dict({"data": {"path": "x.csv", "na_value": ["?"]}, **base})


def test_streamed_engines_refuse_skip_rows_naming_it() -> None:
    from tasks.stream_data import data_engine

    cfg = AuditConfig.from_dict(
        {
            "data": {"path": "big.csv", "engine": "stream", "skip_rows": 1},
            "columns": {"label": "y", "protected": ["s"], "score": "p"},
        }
    )
    with pytest.raises(ConfigError, match=r"data\.engine: stream cannot read .*data\.skip_rows"):
        data_engine(cfg, frame_given=False)
