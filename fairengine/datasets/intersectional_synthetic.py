r"""Intersectional synthetic data with closed-form true ε (FairEngine's own design).

Design: project notes ``intersectional.md`` §5, built because the settings of the seed paper
(Morina, Oliinyk, Waton, Marusic, Georgatzis, "Auditing and achieving intersectional fairness in
classification problems", arXiv:1911.01468) are not available. The ε metrics follow Foulds, Islam,
Keya & Pan, "An intersectional definition of fairness", ICDE 2020 (differential fairness) in the
per-metric, positive-outcome form of Morina et al. (notes §1.3).

Generative model. Two binary attributes A ∈ {a0, a1} and B ∈ {b0, b1} give K = 4 intersections,
indexed s = 2·A + B: s0 = (a0, b0), s1 = (a0, b1), s2 = (a1, b0), s3 = (a1, b1). With the default
shares, **s3 = (a1, b1) is the under-represented intersection (1 %)**.

.. math::

    s_i &\sim \mathrm{Categorical}(\pi), \qquad \pi = (0.45, 0.30, 0.24, 0.01) \\
    y_i \mid s_i &\sim \mathrm{Bernoulli}(b_{s_i}), \qquad b = (0.30, 0.25, 0.20, 0.10) \\
    z_i \mid y_i, s_i &\sim N(\mu_{y_i, s_i},\ 1), \qquad
        \mu_1 = (1.5, 1.2, 1.0, 0.5), \quad \mu_0 = (-1.0, -1.0, -1.2, -1.5) \\
    \text{score}_i &= \sigma(z_i) = 1/(1 + e^{-z_i}), \qquad
        \hat y_i = \mathbf 1\{\text{score}_i > t\}

Draws (``np.random.default_rng(seed)``, in order): s by ``rng.choice(4, size=n, p=π)``; y by
``rng.random(n) < b_s``; z by ``rng.normal(μ_{y,s}, 1)``.

Closed-form truth (Φ the standard normal cdf, logit(t) = ln(t/(1−t))); since ŷ = 1 ⇔ z > logit(t):

.. math::

    \mathrm{TPR}_s = \Phi(\mu_{1,s} - \mathrm{logit}\,t), \quad
    \mathrm{FPR}_s = \Phi(\mu_{0,s} - \mathrm{logit}\,t), \quad
    \mathrm{SR}_s = b_s \mathrm{TPR}_s + (1 - b_s) \mathrm{FPR}_s, \quad
    \bar b = \textstyle\sum_s \pi_s b_s

    \varepsilon(r) = \max_s \ln r_s - \min_s \ln r_s; \quad
    \varepsilon_{slift} = \varepsilon(b), \ \varepsilon_{sp} = \varepsilon(\mathrm{SR}), \
    \varepsilon_{tpr} = \varepsilon(\mathrm{TPR}), \
    \varepsilon_{fpr} = \varepsilon(\mathrm{FPR}), \
    \varepsilon_{eo} = \max(\varepsilon_{tpr}, \varepsilon_{fpr}), \
    \varepsilon_{elift} = \max_s |\ln b_s - \ln \bar b|

With the defaults: ε_slift = ln 3 = 1.0986, ε_elift = ln(0.259/0.10) = 0.9517, ε_sp = 1.1068,
ε_tpr = 0.2998, ε_fpr = 0.8649, ε_eo = 0.8649.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import special, stats

from fairengine.datasets._embedded import EmbeddedDataset, check_int, check_vector
from fairengine.errors import DataContractError
from fairengine.roles import ColumnRoles

K = 4
DEFAULT_SHARES = (0.45, 0.30, 0.24, 0.01)
DEFAULT_BASE_RATES = (0.30, 0.25, 0.20, 0.10)
DEFAULT_MU1 = (1.5, 1.2, 1.0, 0.5)
DEFAULT_MU0 = (-1.0, -1.0, -1.2, -1.5)
#: (attr_a, attr_b) of intersection s = 0..3 (s = 2·A + B).
INTERSECTIONS = (("a0", "b0"), ("a0", "b1"), ("a1", "b0"), ("a1", "b1"))
#: One value per intersection (a sequence, or the checked array of :func:`_check_params`).
_Vector = Sequence[float] | np.ndarray

CITATION = (
    "FairEngine synthetic design (project notes intersectional.md §5), for the metrics of "
    "Morina, G., Oliinyk, V., Waton, J., Marusic, I. and Georgatzis, K. (2019). Auditing and "
    "achieving intersectional fairness in classification problems. arXiv:1911.01468; and Foulds, "
    "J. R., Islam, R., Keya, K. N. and Pan, S. (2020). An intersectional definition of fairness. "
    "ICDE 2020."
)


def _check_params(
    shares: _Vector,
    base_rates: _Vector,
    mu1: _Vector,
    mu0: _Vector,
    threshold: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    pi = check_vector("shares", shares, K, low=0.0, high=1.0, open_interval=True)
    if abs(pi.sum() - 1.0) > 1e-6:
        raise DataContractError(f"shares must sum to 1, got {pi.sum()!r} for {shares!r}")
    b = check_vector("base_rates", base_rates, K, low=0.0, high=1.0, open_interval=True)
    m1 = check_vector("mu1", mu1, K)
    m0 = check_vector("mu0", mu0, K)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float | np.floating):
        raise DataContractError(f"threshold must be a number in (0, 1), got {threshold!r}")
    if not 0.0 < float(threshold) < 1.0:
        raise DataContractError(f"threshold must lie in (0, 1), got {threshold!r}")
    return pi / pi.sum(), b, m1, m0, float(threshold)


def _epsilon(rates: np.ndarray) -> float:
    """max_s ln r_s − min_s ln r_s (positive outcome)."""
    logs = np.log(rates)
    return float(logs.max() - logs.min())


def intersectional_true_epsilons(
    shares: _Vector = DEFAULT_SHARES,
    base_rates: _Vector = DEFAULT_BASE_RATES,
    mu1: _Vector = DEFAULT_MU1,
    mu0: _Vector = DEFAULT_MU0,
    threshold: float = 0.5,
) -> dict[str, float]:
    """Population ε of :func:`make_intersectional_synthetic`'s model, in closed form.

    Returns a dict with keys ``slift``, ``elift``, ``sp``, ``tpr``, ``fpr``, ``eo`` (positive
    outcome, every intersection has positive probability). With ŷ = 1{σ(z) > t}:
    TPR_s = Φ(μ1_s − logit t), FPR_s = Φ(μ0_s − logit t), SR_s = b_s TPR_s + (1 − b_s) FPR_s;
    ε(r) = max_s ln r_s − min_s ln r_s for slift (r = b), sp, tpr, fpr; ε_eo = max(ε_tpr, ε_fpr);
    ε_elift = max_s |ln b_s − ln Σ_s π_s b_s|.
    """
    pi, b, m1, m0, t = _check_params(shares, base_rates, mu1, mu0, threshold)
    cut = float(special.logit(t))
    tpr = stats.norm.cdf(m1 - cut)
    fpr = stats.norm.cdf(m0 - cut)
    sr = b * tpr + (1.0 - b) * fpr
    overall = float(pi @ b)
    eps_tpr, eps_fpr = _epsilon(tpr), _epsilon(fpr)
    return {
        "slift": _epsilon(b),
        "elift": float(np.max(np.abs(np.log(b) - np.log(overall)))),
        "sp": _epsilon(sr),
        "tpr": eps_tpr,
        "fpr": eps_fpr,
        "eo": max(eps_tpr, eps_fpr),
    }


def make_intersectional_synthetic(
    n: int = 20_000,
    seed: int = 0,
    shares: Sequence[float] = DEFAULT_SHARES,
    base_rates: Sequence[float] = DEFAULT_BASE_RATES,
    mu1: Sequence[float] = DEFAULT_MU1,
    mu0: Sequence[float] = DEFAULT_MU0,
    threshold: float = 0.5,
) -> EmbeddedDataset:
    """Scored data over two binary attributes with one tiny intersection and known true ε.

    Parameters
    ----------
    n : number of rows.
    seed : seed of ``np.random.default_rng``.
    shares : probabilities π_s of the 4 intersections s = 2·A + B (order (a0,b0), (a0,b1),
        (a1,b0), (a1,b1)); each in (0, 1), summing to 1.
    base_rates : P(y = 1 | s), each in (0, 1).
    mu1, mu0 : means of the latent logit z given y = 1 and y = 0, per intersection.
    threshold : the decision threshold t on the score that ``truth`` assumes (ŷ = 1{score > t}).

    Returns
    -------
    EmbeddedDataset with columns ``attr_a`` ("a0"/"a1"), ``attr_b`` ("b0"/"b1"), ``y`` (int 0/1)
    and ``score`` (= σ(z), float in (0, 1)); roles: label ``y``, protected ``attr_a``,
    ``attr_b``, score ``score``, no features; ``truth`` = :func:`intersectional_true_epsilons`.
    """
    n = check_int("n", n, 1)
    check_int("seed", seed, 0)
    pi, b, m1, m0, t = _check_params(shares, base_rates, mu1, mu0, threshold)
    rng = np.random.default_rng(seed)
    s = rng.choice(K, size=n, p=pi)
    y = rng.random(n) < b[s]
    z = rng.normal(np.where(y, m1[s], m0[s]), 1.0)
    a_codes, b_codes = s // 2, s % 2
    frame = pd.DataFrame(
        {
            "attr_a": np.array(["a0", "a1"])[a_codes],
            "attr_b": np.array(["b0", "b1"])[b_codes],
            "y": y.astype(np.int64),
            "score": special.expit(z),
        }
    )
    roles = ColumnRoles(label="y", protected=("attr_a", "attr_b"), score="score", features=())
    truth = intersectional_true_epsilons(pi, b, m1, m0, t)
    shown = ", ".join(f"({a},{bb}) {p:.2%}" for (a, bb), p in zip(INTERSECTIONS, pi, strict=True))
    description = (
        f"Synthetic scored data ({n} rows, seed {seed}) over two binary protected attributes "
        f"whose four intersections have shares {shown}; the smallest is the under-represented "
        "one. y | s ~ Bernoulli(base_rate_s), a latent z | y, s ~ N(mu_{y,s}, 1) and score = "
        f"sigmoid(z). The true (population) epsilons of slift, elift, SP, TPR, FPR and EO at "
        f"threshold {t:g} are known in closed form and stored in truth, so estimators of "
        "intersectional fairness can be checked against them."
    )
    return EmbeddedDataset(
        name="intersectional_synthetic",
        frame=frame,
        roles=roles,
        description=description,
        citation=CITATION,
        truth=truth,
        positive_label=1,
    )
