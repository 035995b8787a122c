r"""Flipsets (Black et al. 2020, Definition 4.1) for a binary classifier f and a map T from a
source group S to a target group S′:

.. math:: F^+ = \{x ∈ S : f(x) = 1,\ f(T(x)) = 0\}, \qquad
          F^- = \{x ∈ S : f(x) = 0,\ f(T(x)) = 1\}.

F+ are source members the model favours over their counterparts (advantaged), F− those it
treats worse (disadvantaged). Both directions (S → S′ and S′ → S) are computed by the caller.

**The identity to keep in mind** (the paper's Proposition 4.2): for an exact bijection between
equal-size samples, |F+| − |F−| = #{f = 1 in S} − #{f = 1 in S′}, the demographic-parity count
gap. The asymmetry is therefore no new evidence beyond a DP test; the informative quantities are
the *sizes* (flips beyond the DP gap, 2·min(|F+|, |F−|)) and who is in the flipsets.

Modes: demographic parity maps whole groups (one stratum); equalized odds maps within each
true-label stratum (y = 0 and y = 1 separately) and pools the counts (the paper's §4.1 remark).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import clone

from fairengine.fliptest.outcomes import BINARY, FlipRule
from fairengine.transport._base import TransportConvergenceError, TransportMap
from fairengine.transport.persistence import MapCache

REFIT_EPSILON_FACTORS: tuple[float, ...] = (2.0, 4.0)
"""A refit (null or bootstrap replicate) whose Sinkhorn does not converge at the frozen ε of
the observed fit is retried at these multiples of ε (a slightly smoother map for that
replicate) before the error is raised."""


def fit_transform_robust(m: TransportMap, xs: np.ndarray, xt: np.ndarray) -> tuple[np.ndarray, Any]:
    """``m.fit_transform(xs, xt)``; for a fixed-ε entropic map that does not converge, the same
    fit at 2ε and 4ε (:data:`REFIT_EPSILON_FACTORS`). Returns the images and the fitted map."""
    try:
        return m.fit_transform(xs, xt), m
    except TransportConvergenceError:
        eps = m.get_params().get("epsilon")
        if eps is None:
            raise
        for factor in REFIT_EPSILON_FACTORS:
            wider = clone(m).set_params(epsilon=eps * factor)
            try:
                return wider.fit_transform(xs, xt), wider
            except TransportConvergenceError:
                continue
        raise


Decide = Callable[[np.ndarray, str], np.ndarray]
"""The audited model as a function of points: (points in original units, group label the model
should see for them) -> its outcome per point: a bool array of positive decisions (binary; a
regression model with a threshold), predictions (regression with δ) or class codes
(multiclass), as the :class:`~fairengine.fliptest.outcomes.FlipRule` in use reads them."""


def flipset_masks(
    source_decision: np.ndarray, mapped_decision: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(F+ mask, F− mask): f(x)=1 & f(T x)=0, and f(x)=0 & f(T x)=1."""
    s = np.asarray(source_decision, dtype=bool)
    m = np.asarray(mapped_decision, dtype=bool)
    return s & ~m, ~s & m


@dataclass
class Flipsets:
    """Flipsets of one direction ``source`` → ``target`` (masks over the source rows, one per
    kind of the :class:`~fairengine.fliptest.outcomes.FlipRule`: ``positive`` and ``negative``,
    or ``changed``). ``source_decision`` and ``mapped_decision`` are the model's outcomes for
    the source rows and their images (decisions, predictions or class codes)."""

    source: str
    target: str
    x: np.ndarray
    images: np.ndarray
    source_decision: np.ndarray
    mapped_decision: np.ndarray
    masks: dict[str, np.ndarray]

    @property
    def positive(self) -> np.ndarray:
        """F+ (binary and regression rules)."""
        return self.masks["positive"]

    @property
    def negative(self) -> np.ndarray:
        """F− (binary and regression rules)."""
        return self.masks["negative"]

    @property
    def n(self) -> int:
        return len(self.x)

    @property
    def n_positive(self) -> int:
        return int(self.positive.sum())

    @property
    def n_negative(self) -> int:
        return int(self.negative.sum())

    @property
    def net(self) -> int:
        """|F+| − |F−| (for decisions: the source − mapped positive count difference, for any
        map)."""
        return self.n_positive - self.n_negative


def fit_images(
    estimator: TransportMap | dict[Any, TransportMap],
    xs: np.ndarray,
    xt: np.ndarray,
    strata_s: np.ndarray,
    strata_t: np.ndarray,
    query: np.ndarray | None = None,
    query_strata: np.ndarray | None = None,
    cache: MapCache | None = None,
    files: dict[Any, tuple[Path, bool]] | None = None,
) -> tuple[np.ndarray, np.ndarray | None, dict[Any, TransportMap]]:
    """Fit a fresh clone of ``estimator`` (or of ``estimator[stratum]``) per stratum.

    Returns the in-sample images of ``xs`` (``fit_transform``: the bijection for exact OT),
    the out-of-sample images of ``query`` (or None) and the fitted maps by stratum. With a
    :class:`~fairengine.transport.MapCache`, each stratum's map is loaded when the same
    estimator was fitted on the same data before, else fitted and saved; ``files`` (if given)
    receives ``stratum -> (map file, loaded from the cache?)``.
    """
    images = np.empty_like(xs)
    q_images = None if query is None else np.empty_like(query)
    fitted: dict[Any, TransportMap] = {}
    for s in np.unique(strata_s):
        si, ti = strata_s == s, strata_t == s
        m = clone(estimator[s] if isinstance(estimator, dict) else estimator)
        if cache is None:
            images[si], m = fit_transform_robust(m, xs[si], xt[ti])
        else:
            images[si], m, path, hit = cache.fit_transform(
                m, xs[si], xt[ti], fit=fit_transform_robust
            )
            if files is not None:
                files[s] = (path, hit)
        fitted[s] = m
        if query is not None and query_strata is not None:
            qi = query_strata == s
            if qi.any():
                q_images[qi] = m.transform(query[qi])  # type: ignore[index]
    return images, q_images, fitted


def compute_flipsets(
    estimator: TransportMap,
    xs: np.ndarray,
    xt: np.ndarray,
    decide: Decide,
    source: str,
    target: str,
    strata_s: np.ndarray | None = None,
    strata_t: np.ndarray | None = None,
    rule: FlipRule = BINARY,
) -> Flipsets:
    """Flipsets of ``source`` → ``target`` with one map per stratum (None: one stratum);
    ``rule`` says what ``decide`` returns and what a flip is (default: the paper's
    decisions)."""
    ss = np.zeros(len(xs), int) if strata_s is None else np.asarray(strata_s)
    st = np.zeros(len(xt), int) if strata_t is None else np.asarray(strata_t)
    images, _, _ = fit_images(estimator, xs, xt, ss, st)
    dec_s = rule.outcomes(decide(xs, source))
    dec_m = rule.outcomes(decide(images, target))
    masks = dict(zip(rule.kinds, rule.masks(dec_s, dec_m), strict=True))
    return Flipsets(source, target, xs, images, dec_s, dec_m, masks)
