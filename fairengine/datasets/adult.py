"""Loader for the UCI Adult ("Census Income") data from files the user provides.

Source: R. Kohavi, "Scaling up the accuracy of Naive-Bayes classifiers: a decision-tree hybrid",
KDD 1996; B. Becker and R. Kohavi, "Adult", UCI Machine Learning Repository, 1996,
doi:10.24432/C5XW20. Extracted from the 1994 US Census; split 2/3 : 1/3 into ``adult.data``
(32,561 rows) and ``adult.test`` (16,281 rows); 23.93 % of all 48,842 rows earn more than $50K.

Nothing is downloaded: :func:`load_adult` reads ``adult.data`` and ``adult.test`` (or their gzip
copies ``adult.data.gz``/``adult.test.gz``) from a folder, and handles the files' quirks:

* no header: the 15 columns are named ``age, workclass, fnlwgt, education, education_num,
  marital_status, occupation, relationship, race, sex, capital_gain, capital_loss,
  hours_per_week, native_country, income`` (``adult.names`` order, ``-`` written as ``_``);
* fields are separated by ", " (a comma and a space);
* ``?`` marks a missing value (workclass, occupation, native_country). Rows are kept; the
  categorical columns use pandas' ``string`` dtype, so missing entries are ``pd.NA``;
* ``adult.test`` starts with the line ``|1x3 Cross validator`` (skipped) and its labels end with
  a period (``>50K.``, ``<=50K.``; the period is removed);
* blank trailing lines are skipped.

Derived columns: ``income_gt_50k`` = 1 when ``income`` is ``>50K`` else 0 (the label), and with
``split="both"`` a ``split`` column ("train"/"test"). Features are the 13 columns other than the
label columns (``income``, ``income_gt_50k``) and ``fnlwgt``; ``fnlwgt`` is a CPS sampling weight
(the number of people a row stands for), not a characteristic of the person, so it is left out of
the features and not used as a weight either. The features include the protected attributes
``sex`` and ``race`` (the usual full-feature Adult model); drop them from ``roles.features`` for a
model that does not see them.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TextIO

import numpy as np
import pandas as pd

from fairengine.datasets._embedded import EmbeddedDataset
from fairengine.errors import DataContractError
from fairengine.roles import ColumnRoles

COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
)
NUMERIC = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")
CATEGORICAL = tuple(c for c in COLUMNS if c not in NUMERIC)
LABEL = "income_gt_50k"
FEATURES = tuple(c for c in COLUMNS if c not in ("income", "fnlwgt"))
FILES = {"train": "adult.data", "test": "adult.test"}
SPLITS = ("train", "test", "both")
INCOME_VALUES = ("<=50K", ">50K")

CITATION = (
    "Becker, B. and Kohavi, R. (1996). Adult. UCI Machine Learning Repository, "
    "doi:10.24432/C5XW20. Kohavi, R. (1996). Scaling up the accuracy of Naive-Bayes "
    "classifiers: a decision-tree hybrid. Proceedings of KDD-96, 202-207."
)


def _find_file(folder: Path, split: str) -> Path:
    name = FILES[split]
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise DataContractError(
        f"Adult {split} file not found in {str(folder)!r}: expected {name!r} or {name + '.gz'!r} "
        f"there (the UCI files adult.data and adult.test, optionally gzipped)"
    )


def _open_text(file: Path) -> TextIO:
    if file.name.endswith(".gz"):
        return gzip.open(file, "rt", encoding="utf-8", newline="")
    return open(file, encoding="utf-8", newline="")


def _read_file(file: Path) -> pd.DataFrame:
    """One UCI Adult file as a frame with the 15 named columns and the label cleaned."""
    try:
        with _open_text(file) as fh:
            first = fh.readline()
            skip = 1 if first.lstrip().startswith("|") else 0
            fh.seek(0)
            frame = pd.read_csv(
                fh,
                header=None,
                names=list(COLUMNS),
                index_col=False,
                skiprows=skip,
                skipinitialspace=True,
                skip_blank_lines=True,
                na_values=["?"],
                keep_default_na=False,
                dtype={c: np.int64 for c in NUMERIC} | {c: "string" for c in CATEGORICAL},
            )
    except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError) as exc:
        raise DataContractError(
            f"could not read {str(file)!r} as a UCI Adult file (15 comma-separated fields, "
            f"6 of them integers): {type(exc).__name__}: {exc}"
        ) from exc
    if len(frame) == 0:
        raise DataContractError(f"Adult file {str(file)!r} has no data rows")
    income = frame["income"].str.strip().str.rstrip(".")
    bad = sorted(set(income.dropna().unique()) - set(INCOME_VALUES))
    if bad or income.isna().any():
        shown = bad[:5] if bad else ["<missing>"]
        raise DataContractError(
            f"Adult file {str(file)!r}: the income column (15th field) must be one of "
            f"{list(INCOME_VALUES)} (optionally with a trailing '.'), found {shown}"
        )
    frame["income"] = income
    frame[LABEL] = (income == ">50K").astype(np.int64)
    return frame


def load_adult(path: str | Path, split: str = "both") -> EmbeddedDataset:
    """Read UCI Adult from the folder ``path`` (``adult.data``/``adult.test``, optionally ``.gz``).

    Parameters
    ----------
    path : folder holding ``adult.data`` (train) and/or ``adult.test`` (test), each possibly
        gzipped (``adult.data.gz``, ``adult.test.gz``). Only the files of ``split`` are needed.
    split : ``"train"``, ``"test"`` or ``"both"`` (train rows then test rows, with a ``split``
        column).

    Returns
    -------
    EmbeddedDataset named ``adult`` with the 15 UCI columns (``income`` without the test file's
    trailing period; categorical columns of dtype ``string`` with ``pd.NA`` for ``?``), the label
    ``income_gt_50k`` (int 0/1), and ``split`` when ``split="both"``. Roles: label
    ``income_gt_50k``, protected ``sex`` and ``race``, features the 13 columns other than
    ``income``/``income_gt_50k`` and ``fnlwgt`` (see the module docstring), no weight.

    Raises
    ------
    DataContractError : ``split`` is not one of the three values; ``path`` is not a folder; a
        needed file is missing (the message names the folder and the expected file names); or a
        file does not parse as UCI Adult.
    """
    if split not in SPLITS:
        raise DataContractError(f"split must be one of {list(SPLITS)}, got {split!r}")
    if not isinstance(path, str | Path):
        raise DataContractError(
            f"path must be a folder path (str or Path), got {type(path).__name__}"
        )
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise DataContractError(
            f"Adult folder {str(folder)!r} does not exist or is not a directory; pass the folder "
            "holding adult.data and adult.test (or adult.data.gz and adult.test.gz)"
        )
    wanted = ("train", "test") if split == "both" else (split,)
    files = {s: _find_file(folder, s) for s in wanted}  # check all files before reading any
    parts = []
    for s, file in files.items():
        part = _read_file(file)
        if split == "both":
            part["split"] = pd.array([s] * len(part), dtype="string")
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]

    roles = ColumnRoles(label=LABEL, protected=("sex", "race"), features=FEATURES)
    counts = ", ".join(f"{s} {len(part)}" for s, part in zip(wanted, parts, strict=True))
    description = (
        "UCI Adult (Census Income): one row per adult in the 1994 US Current Population Survey "
        "extract of Becker and Kohavi; the task is whether income exceeds $50K a year "
        f"(income_gt_50k). Rows: {counts}. '?' entries are kept as missing (pd.NA); fnlwgt, the "
        "survey weight, is kept as a column but is not a feature. Protected attributes: sex and "
        "race (5 categories)."
    )
    return EmbeddedDataset(
        name="adult",
        frame=frame,
        roles=roles,
        description=description,
        citation=CITATION,
        truth={},
        positive_label=1,
    )
