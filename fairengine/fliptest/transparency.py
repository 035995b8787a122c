r"""Transparency reports (Black et al. 2020, Definition 4.3) and flipset marginals.

For a flipset F of source points x with images T(x), per feature k:

.. math:: \mathrm{mean\ difference}_k = \frac1{|F|}\sum_{x∈F} (T(x) − x)_k, \qquad
          \mathrm{consistency}_k = \frac1{|F|}\sum_{x∈F} \operatorname{sign}(T(x) − x)_k,

each ranked by absolute value. Differences are in pooled standard deviations of the pair (the
paper's Lipton report is in SD units). A per-feature sign test (binomial, H0: positive and
negative changes equally likely among non-zero changes) gives a p-value for the consistency; it
treats the map as fixed (the bootstrap intervals in :mod:`fairengine.fliptest.statistics`
carry the map's own uncertainty).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats


@dataclass
class TransparencyReport:
    """Mean difference and consistency per feature over one flipset (standardized units)."""

    features: list[str]
    n: int
    mean_difference: np.ndarray
    consistency: np.ndarray
    sign_pvalue: np.ndarray

    def ranking(self, by: str = "mean_difference") -> list[str]:
        """Feature names sorted by |value| of ``by`` (largest first; ties keep column order);
        empty for an empty flipset."""
        if self.n == 0:
            return []
        v = np.abs(getattr(self, by))
        return [self.features[j] for j in np.argsort(-np.nan_to_num(v, nan=-1.0), kind="stable")]


def transparency_vectors(
    displacement: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(mean difference, consistency) of ``displacement`` rows selected by ``mask``; NaN when
    the flipset is empty."""
    d = displacement[np.asarray(mask, dtype=bool)]
    if len(d) == 0:
        nan = np.full(displacement.shape[1], np.nan)
        return nan, nan.copy()
    return d.mean(axis=0), np.sign(d).mean(axis=0)


def sign_test(displacement: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Two-sided exact binomial sign test per feature over the flipset (NaN if no non-zero
    change)."""
    d = displacement[np.asarray(mask, dtype=bool)]
    pos = (d > 0).sum(axis=0)
    nz = (d != 0).sum(axis=0)
    k = np.minimum(pos, nz - pos)
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2.0 * stats.binom.cdf(k, nz, 0.5))
    return np.where(nz > 0, p, np.nan)


def transparency_report(
    x: np.ndarray, images: np.ndarray, mask: np.ndarray, scale: np.ndarray, features: list[str]
) -> TransparencyReport:
    """Definition 4.3 on flipset ``mask``; ``scale`` converts to standardized units."""
    disp = (images - x) / scale
    md, cons = transparency_vectors(disp, mask)
    return TransparencyReport(
        features=list(features),
        n=int(np.sum(mask)),
        mean_difference=md,
        consistency=cons,
        sign_pvalue=sign_test(disp, mask),
    )


def marginal_histograms(
    x: np.ndarray,
    masks: dict[str, np.ndarray],
    features: list[str],
    bins: int = 20,
) -> dict[str, Any]:
    """Binned marginal counts per feature of the whole group and of each flipset (report plots:
    flipset members versus their group). Edges span the group's range."""
    out: dict[str, Any] = {}
    for j, name in enumerate(features):
        lo, hi = float(x[:, j].min()), float(x[:, j].max())
        if hi <= lo:
            hi = lo + 1.0
        edges = np.linspace(lo, hi, bins + 1)
        entry: dict[str, Any] = {"edges": edges.tolist()}
        entry["group"] = np.histogram(x[:, j], edges)[0].tolist()
        for label, m in masks.items():
            entry[label] = np.histogram(x[np.asarray(m, bool), j], edges)[0].tolist()
        out[name] = entry
    return out
