"""Apply a fitted RTDP rule to raw rows: what the deployed (MLflow pyfunc) mitigated model does.

The rule is the mitigation result's :class:`~fairengine.mitigation.result.DeployedRule`
(``details.postprocessor``), or its JSON as the MLflow pyfunc model stores it (and as
``audit.json`` holds it): the attributes, their levels (strings, as the audit encodes them) and
bins, and per intersection (flat index in the attribute grid) the threshold τ_s and flip
probabilities p_s, q_s. A row's P(ỹ = 1) is q_s when its score is above τ_s, else p_s. A category
never seen when the rule was fitted has no intersection: such rows get the rule of the largest
fitted intersection (``global_source``) and are counted in the returned ``unknown`` total, so the
caller can warn; they are never silently set negative.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fairengine.errors import DataContractError
from fairengine.intersectional.method import bin_values
from fairengine.mitigation.result import DeployedRule
from fairengine.results import decode_float

Rule = DeployedRule | Mapping[str, Any]
"""A rule: typed, or its JSON (extra keys, such as the pyfunc's ``feature_columns``, ignored)."""


@dataclass(frozen=True)
class _Applied:
    """What applying a rule needs (the intersections and the rule per intersection)."""

    attributes: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    bins: dict[str, list[float]]
    grid_shape: tuple[int, ...]
    thresholds: np.ndarray
    p: np.ndarray
    q: np.ndarray
    global_source: int


def _floats(values: Any) -> list[float]:
    """Numbers of a rule (in JSON, non-finite ones may be the strings ``"Infinity"``, …)."""
    return [float(decode_float(v)) for v in values]  # type: ignore[arg-type]


def _applied(rule: Rule | _Applied) -> _Applied:
    """The parts of ``rule`` the model applies. A JSON rule needs only these keys (others, such
    as the pyfunc's ``feature_columns`` and ``score_source``, are not read here)."""
    if isinstance(rule, _Applied):
        return rule
    if isinstance(rule, DeployedRule):
        attributes, levels, grid_shape = rule.attributes, rule.levels, rule.grid_shape
        bins_raw: Mapping[str, Any] = rule.bins
        thresholds, p, q, source = rule.thresholds, rule.p, rule.q, rule.global_source
    else:
        attributes = tuple(str(a) for a in rule["attributes"])
        levels = tuple(tuple(str(v) for v in lv) for lv in rule["levels"])
        grid_shape = tuple(int(n) for n in rule["grid_shape"])
        bins_raw = rule.get("bins") or {}
        thresholds, p, q = rule["thresholds"], rule["p"], rule["q"]
        source = int(rule["global_source"])
    return _Applied(
        attributes=attributes,
        levels=levels,
        bins={a: _floats(e) for a, e in bins_raw.items()},
        grid_shape=grid_shape,
        thresholds=np.asarray(_floats(thresholds), dtype=np.float64),
        p=np.asarray(_floats(p), dtype=np.float64),
        q=np.asarray(_floats(q), dtype=np.float64),
        global_source=source,
    )


def encode_rule_groups(rule: Rule | _Applied, frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Flat intersection id per row of ``frame`` (−1 where a category is unknown) and the number
    of such rows."""
    r = _applied(rule)
    attrs, bins = list(r.attributes), r.bins
    missing = [a for a in attrs if a not in frame.columns]
    if missing:
        raise DataContractError(
            f"the mitigated model needs the attribute column(s) {missing} in its input "
            f"(it applies per-intersection thresholds over {attrs})"
        )
    codes = []
    unknown = np.zeros(len(frame), dtype=bool)
    for a, lv in zip(attrs, r.levels, strict=True):
        if a in bins:
            x = pd.to_numeric(frame[a], errors="coerce").to_numpy(dtype=np.float64)
            c, _ = bin_values(x, bins[a], f"column {a!r}", f"the mitigated model's bins for {a}")
        else:
            lookup = pd.Series(np.arange(len(lv)), index=list(lv))
            text = frame[a].astype(object).map(str)
            c = text.map(lookup).fillna(-1).to_numpy().astype(np.intp)
        unknown |= c < 0
        codes.append(np.where(c < 0, 0, c))
    shape = r.grid_shape
    flat = np.ravel_multi_index(codes, shape) if len(frame) else np.zeros(0, np.intp)
    return np.where(unknown, -1, flat), int(unknown.sum())


def apply_rule(rule: Rule, frame: pd.DataFrame, score: np.ndarray) -> tuple[np.ndarray, int]:
    """P(ỹ = 1) per row of ``frame`` with probability ``score``, and the count of rows with an
    unknown category (module docstring). ``rule``: a :class:`DeployedRule` or its JSON."""
    f = np.asarray(score, dtype=np.float64)
    if f.shape != (len(frame),):
        raise DataContractError(f"score must have one value per row ({len(frame)})")
    r = _applied(rule)
    g, unknown = encode_rule_groups(r, frame)
    g = np.where(g < 0, r.global_source, g)
    return np.where(f > r.thresholds[g], r.q[g], r.p[g]), unknown
