r"""One example per non-binary task: a biased proxy feature (FairEngine's own design).

Generative model. Each row is a person (or an item of a ranking) with a protected attribute
``group`` ∈ {A, B} (B with probability ``share_b``), an independent attribute ``region`` ∈
{north, south} (probability 1/2 each; it has no effect, so every test of it is a true null), and a
latent ability q that has the **same** distribution in both groups. Two features measure q: x1
without bias, and a proxy x2 that reads ``shift`` lower for group B (a test that under-rates B):

.. math::

    q \sim N(0, 1), \qquad x_1 = q + e_1, \qquad x_2 = q + e_2 - s\,\mathbf 1\{B\},
    \qquad e_1, e_2 \sim N(0, \sigma_x^2)

The outcome (``task``):

* ``regression``: y = q + e_y, e_y ~ N(0, σ_y²). A least-squares model of y on (x1, x2) then
  under-predicts group B. In the population the model's coefficients are β = Σ⁻¹c with
  Σ = Cov(x1, x2) = [[1 + σ_x², 1], [1, 1 + σ_x² + s² p(1 − p)]], c = (1, 1), p = ``share_b``,
  and the mean residual (bias, y − ŷ) of B minus A is **β₂ s** (closed form: ``truth``
  ``bias_gap_b_minus_a``). Mean target and the residual's variance do not depend on the group.
* ``multiclass``: y = low / medium / high as t = q + e_y falls below −0.5, between, or above
  0.5. True class shares are equal across groups, P(high) = 1 − Φ(0.5 / √(1 + σ_y²)) (``truth``
  ``share_high``); a model of y on (x1, x2) predicts fewer ``high`` for B.
* ``ranking``: rows are items in lists (``query``) of ``list_size``; relevance = 1{q + e_y > 1}
  (``truth`` ``relevance_rate`` = 1 − Φ(1 / √(1 + σ_y²)), equal across groups). A model scoring
  relevance from (x1, x2) ranks B's items lower within each list.

With ``shift = 0`` nothing distinguishes the groups: every fairness null holds.

Draws (``np.random.default_rng(seed)``, in order): group, region, q, e1, e2, e_y.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from fairengine.datasets._embedded import EmbeddedDataset, check_int
from fairengine.errors import DataContractError
from fairengine.roles import ColumnRoles

TASK_EXAMPLES = ("regression", "multiclass", "ranking")
CLASSES = ("low", "medium", "high")
CITATION = (
    "FairEngine synthetic design: a proxy feature measured with a group offset (measurement "
    "bias), the mechanism of e.g. Kusner, Loftus, Russell and Silva (2017), Counterfactual "
    "fairness, NeurIPS (the law school example)."
)


def _check_number(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise DataContractError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not (np.isfinite(v) and low <= v <= high):
        raise DataContractError(f"{name} must lie in [{low}, {high}], got {value!r}")
    return v


def proxy_shift_truth(
    shift: float = 1.0, share_b: float = 0.3, noise_x: float = 0.5, noise_y: float = 0.5
) -> dict[str, float]:
    """Population quantities of the model (module docstring), in closed form."""
    p = share_b
    sx, sy = noise_x**2, noise_y**2
    cov = np.array([[1 + sx, 1.0], [1.0, 1 + sx + shift**2 * p * (1 - p)]])
    beta = np.linalg.solve(cov, np.ones(2))
    scale = float(np.sqrt(1 + sy))
    return {
        "shift": float(shift),
        "beta_x1": float(beta[0]),
        "beta_x2": float(beta[1]),
        "bias_gap_b_minus_a": float(beta[1] * shift),
        "share_high": float(stats.norm.sf(0.5 / scale)),
        "relevance_rate": float(stats.norm.sf(1.0 / scale)),
    }


def make_proxy_shift(
    task: str = "regression",
    n: int = 4000,
    seed: int = 0,
    shift: float = 1.0,
    share_b: float = 0.3,
    noise_x: float = 0.5,
    noise_y: float = 0.5,
    list_size: int = 20,
) -> EmbeddedDataset:
    """The proxy-shift example of ``task`` (``regression``, ``multiclass`` or ``ranking``):
    ``n`` rows (a ranking: ``n // list_size`` lists of ``list_size`` items). The model's
    input columns are ``x1`` and ``x2``; the frame has no score column (train a model on it)."""
    if task not in TASK_EXAMPLES:
        raise DataContractError(f"task must be one of {list(TASK_EXAMPLES)}, got {task!r}")
    n = check_int("n", n, 100)
    seed = check_int("seed", seed, 0)
    shift = _check_number("shift", shift, 0.0, 10.0)
    share_b = _check_number("share_b", share_b, 0.01, 0.99)
    noise_x = _check_number("noise_x", noise_x, 0.0, 10.0)
    noise_y = _check_number("noise_y", noise_y, 0.0, 10.0)
    list_size = check_int("list_size", list_size, 2)
    if task == "ranking":
        n = (n // list_size) * list_size
        if n == 0:
            raise DataContractError(f"n must hold at least one list of {list_size} items")
    rng = np.random.default_rng(seed)
    is_b = rng.random(n) < share_b
    region = np.where(rng.random(n) < 0.5, "north", "south")
    q = rng.normal(size=n)
    x1 = q + rng.normal(scale=noise_x, size=n)
    x2 = q + rng.normal(scale=noise_x, size=n) - shift * is_b
    t = q + rng.normal(scale=noise_y, size=n)
    frame = pd.DataFrame({"group": np.where(is_b, "B", "A"), "region": region, "x1": x1, "x2": x2})
    truth = proxy_shift_truth(shift, share_b, noise_x, noise_y)
    if task == "regression":
        frame["y"] = t
        roles = ColumnRoles("y", ("group", "region"), features=("x1", "x2"))
        what = "a real-valued outcome y = q + noise"
    elif task == "multiclass":
        frame["y"] = np.asarray(CLASSES)[np.digitize(t, [-0.5, 0.5])]
        roles = ColumnRoles("y", ("group", "region"), features=("x1", "x2"))
        what = "a class low / medium / high by q + noise"
    else:
        frame.insert(0, "query", np.repeat(np.arange(n // list_size), list_size))
        frame["relevant"] = (t > 1.0).astype(int)
        roles = ColumnRoles("relevant", ("group", "region"), features=("x1", "x2"), list_id="query")
        what = f"items in lists of {list_size}, relevant when q + noise > 1"
    description = (
        f"Proxy-shift example ({task}): {n} rows, {what}; the proxy feature x2 reads {shift:g} "
        f"lower for group B (share {share_b:g}) at the same ability, so a model on (x1, x2) "
        "treats B worse; region has no effect."
    )
    return EmbeddedDataset(
        name=f"proxy_shift_{task}",
        frame=frame,
        roles=roles,
        description=description,
        citation=CITATION,
        truth=truth,
        positive_label=None,
    )
