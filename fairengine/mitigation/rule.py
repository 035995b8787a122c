"""Apply a fitted RTDP rule to raw rows: what the deployed (MLflow pyfunc) mitigated model does.

The rule is the plain-data ``details["postprocessor"]`` of the mitigation result: the attributes,
their levels (strings, as the audit encodes them) and bins, and per intersection (flat index in the
attribute grid) the threshold τ_s and flip probabilities p_s, q_s. A row's P(ỹ = 1) is q_s when its
score is above τ_s, else p_s. A category never seen when the rule was fitted has no intersection:
such rows get the rule of the largest fitted intersection (``global_source``) and are counted in
the returned ``unknown`` total, so the caller can warn; they are never silently set negative.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fairengine.errors import DataContractError
from fairengine.intersectional.method import bin_values


def encode_rule_groups(rule: dict[str, Any], frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Flat intersection id per row of ``frame`` (−1 where a category is unknown) and the number
    of such rows."""
    attrs, levels, bins = rule["attributes"], rule["levels"], rule.get("bins", {})
    missing = [a for a in attrs if a not in frame.columns]
    if missing:
        raise DataContractError(
            f"the mitigated model needs the attribute column(s) {missing} in its input "
            f"(it applies per-intersection thresholds over {attrs})"
        )
    codes = []
    unknown = np.zeros(len(frame), dtype=bool)
    for a, lv in zip(attrs, levels, strict=True):
        if a in bins:
            x = pd.to_numeric(frame[a], errors="coerce").to_numpy(dtype=np.float64)
            c, _ = bin_values(x, bins[a], f"column {a!r}", f"the mitigated model's bins for {a}")
        else:
            lookup = pd.Series(np.arange(len(lv)), index=[str(v) for v in lv])
            text = frame[a].astype(object).map(str)
            c = text.map(lookup).fillna(-1).to_numpy().astype(np.intp)
        unknown |= c < 0
        codes.append(np.where(c < 0, 0, c))
    shape = tuple(int(s) for s in rule["grid_shape"])
    flat = np.ravel_multi_index(codes, shape) if len(frame) else np.zeros(0, np.intp)
    return np.where(unknown, -1, flat), int(unknown.sum())


def apply_rule(
    rule: dict[str, Any], frame: pd.DataFrame, score: np.ndarray
) -> tuple[np.ndarray, int]:
    """P(ỹ = 1) per row of ``frame`` with probability ``score``, and the count of rows with an
    unknown category (module docstring)."""
    f = np.asarray(score, dtype=np.float64)
    if f.shape != (len(frame),):
        raise DataContractError(f"score must have one value per row ({len(frame)})")
    g, unknown = encode_rule_groups(rule, frame)
    tau = np.asarray(rule["thresholds"], dtype=np.float64)
    p = np.asarray(rule["p"], dtype=np.float64)
    q = np.asarray(rule["q"], dtype=np.float64)
    g = np.where(g < 0, int(rule["global_source"]), g)
    return np.where(f > tau[g], q[g], p[g]), unknown
