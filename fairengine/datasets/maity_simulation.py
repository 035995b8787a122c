r"""Two-group 2-D simulation of Maity, Xue, Yurochkin & Sun (ICLR 2021), Appendix E / Figure 1.

Source: S. Maity, S. Xue, M. Yurochkin, Y. Sun, "Statistical inference for individual fairness",
ICLR 2021, Appendix E ("Supplementary details for simulations") and Figure 1; data generator
``simulation/generate_data.py`` of the authors' repository
``smaityumich/individual-fairness-testing``.

Generative model (n rows, i = 1..n; "majority" is the group with z_i = True):

.. math::

    z_i &\sim \mathrm{Bernoulli}(0.9)            \quad (\text{majority indicator}) \\
    x_i &= \mu_{z_i} + e_i, \qquad e_i \sim N(0,\, 0.25^2 I_2) \\
    \mu_{\text{maj}} &= (-1.5,\ 0), \qquad \mu_{\text{min}} = (+1.5,\ 0) \\
    w_{\text{maj}} &= (-0.2,\ -0.01), \qquad w_{\text{min}} = (+0.2,\ -0.01) \\
    y_i &= \mathbf 1\{\, w_{z_i}^\top x_i - w_{z_i}^\top \mu_{z_i} + 0.01\,\xi_i > 0 \,\}, \qquad
          \xi_i \sim N(0, 1)

(the original writes ``sign(...)`` in {-1, +1} and maps it to {0, 1} by (y + 1)/2). The two groups
differ mainly along x1, which is the "sensitive" direction of the paper's fair metric, and their
labels are decided by opposite halves of their own cloud, so a single linear classifier cannot be
fair to both groups.

Random draws, in this order, from one legacy Mersenne-Twister stream seeded with ``seed``
(``np.random.RandomState(seed)``, the same stream as ``np.random.seed(seed)`` followed by the
``np.random.*`` functions, without touching NumPy's global state):

1. ``e = normal(0, 0.25, size=(n, 2))``;
2. ``z = choice([False, True], size=n, p=[0.1, 0.9])``;
3. ``xi = normal(size=n)``, noise = 0.01·xi.

This is the order of the authors' ``generate_data.py``. With the defaults (n = 400, seed = 1) it
reproduces the paper's data set. The project notes (individual.md §2.9) record that this recipe
regenerates the stored ``x.npy``/``y.npy`` to 7e-18. We could not read those binary files here, so
we checked it indirectly: running the authors' attack (loss_linear.py, λ = 100, 400 steps) on this
data gives the stored test-statistic grids' reference values to 6 decimals (all 441 classifiers at
0°, 5°, 10°, 20°: grid means 1.316953, 1.319616, 1.327420, 1.358457); the test suite checks three
grid points at 0°.

True quantities (``truth``): P(minority) = 0.1, and P(y = 1 | group) = 1/2 in both groups, because
w_zᵀ(x − μ_z) + noise is a zero-mean normal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fairengine.datasets._embedded import EmbeddedDataset, check_int, check_seed
from fairengine.roles import ColumnRoles

SIGMA = 0.25
MINORITY_SHARE = 0.1
NOISE_SD = 0.01
MU_MAJORITY = np.array([-1.5, 0.0])
MU_MINORITY = np.array([1.5, 0.0])
W_MAJORITY = np.array([-0.2, -0.01])
W_MINORITY = np.array([0.2, -0.01])

CITATION = (
    "Maity, S., Xue, S., Yurochkin, M. and Sun, Y. (2021). Statistical inference for individual "
    "fairness. International Conference on Learning Representations (ICLR 2021), Appendix E. "
    "Code: github.com/smaityumich/individual-fairness-testing (simulation/generate_data.py)."
)


def make_maity_simulation(n: int = 400, seed: int = 1) -> EmbeddedDataset:
    """The Maity et al. (2021) Figure 1 simulation: two Gaussian groups in 2-D, 10 % minority.

    Parameters
    ----------
    n : number of rows (the paper uses 400).
    seed : seed of the legacy ``RandomState`` stream (the paper uses 1).

    Returns
    -------
    EmbeddedDataset with columns ``x1``, ``x2`` (float), ``group`` ("majority"/"minority") and
    ``y`` (int 0/1); roles: label ``y``, protected ``group``, features ``x1``, ``x2``.
    See the module docstring for the model and the exact draw order.
    """
    n = check_int("n", n, 1)
    seed = check_seed(seed)
    rs = np.random.RandomState(seed)
    noise_x = rs.normal(0.0, SIGMA, size=(n, 2))
    majority = rs.choice([False, True], size=n, p=[MINORITY_SHARE, 1.0 - MINORITY_SHARE])
    noise_y = rs.normal(size=n) * NOISE_SD

    mu = np.where(majority[:, None], MU_MAJORITY, MU_MINORITY)
    w = np.where(majority[:, None], W_MAJORITY, W_MINORITY)
    x = noise_x + mu
    margin = np.sum(x * w, axis=1) - np.sum(w * mu, axis=1) + noise_y
    y = (margin > 0).astype(np.int64)

    frame = pd.DataFrame(
        {
            "x1": x[:, 0],
            "x2": x[:, 1],
            "group": np.where(majority, "majority", "minority"),
            "y": y,
        }
    )
    roles = ColumnRoles(label="y", protected=("group",), features=("x1", "x2"))
    description = (
        f"Simulated two-group data of Maity et al. (2021), Appendix E: {n} points in 2-D; each "
        "is in the majority group with probability 0.9 (mean (-1.5, 0)) or the minority "
        "(mean (+1.5, 0)), with N(0, 0.25^2 I) scatter. The label is 1 when "
        "w_g'(x - mu_g) + 0.01 N(0,1) > 0, with w_majority = (-0.2, -0.01) and w_minority = "
        "(0.2, -0.01): the groups differ along x1, the sensitive direction, and their labels "
        "depend on x1 in opposite ways. Used to map the individual-fairness test statistic over "
        f"a grid of linear classifiers (paper: n = 400, seed 1; here seed {seed})."
    )
    truth = {
        "p_minority": MINORITY_SHARE,
        "p_y1_majority": 0.5,
        "p_y1_minority": 0.5,
    }
    return EmbeddedDataset(
        name="maity_simulation",
        frame=frame,
        roles=roles,
        description=description,
        citation=CITATION,
        truth=truth,
        positive_label=1,
    )
