"""Maity et al. (ICLR 2021) Adult set-up, shared by the individual-fairness benchmarks.

Preprocessing exactly as the authors' ``adult_modified.py`` (notes ``individual.md`` §2.2):
train + test concatenated (48,842 rows), rows with a missing native-country or occupation dropped
(45,222 rows), one-hot encoding of workclass, marital-status, occupation, relationship, sex, race
(alphabetical dummies), native-country / fnlwgt / education dropped, race reduced to
``race_White`` and sex to ``sex_Male``. Features 0-38 are the model inputs (5 continuous,
standardised on the train split, + 34 dummies); 39 = sex_Male and 40 = race_White are the
protected attributes, not model inputs. Splits: ``np.random.seed(seed_data)``,
``perm = np.random.permutation(45222)``, train = perm[:36177], test = perm[36177:] (9,045 rows).

The four models of Table 1 (§2.4), retrained here in torch / fairlearn (the authors' Keras
weights are not used):

* Baseline: MLP 39-50(ReLU)-2, Adam lr 1e-4, 8,000 steps of class-balanced batches of 250.
* Project: the same with a fixed first map x -> x(I - AᵀA), A = orthonormalised logistic-
  regression coefficients of sex and race fitted on the train split.
* Reduction: fairlearn ExponentiatedGradient(LogisticRegression(liblinear, balanced),
  EqualizedOdds, eps=0.03), sensitive feature sex + 2 race; audited as the soft mixture
  Σ w_t σ(θ_tᵀx + b_t), as the authors did.
* SenSR: MLP 39-100(ReLU)-2 trained by the two-stage adversarial recipe of the authors'
  ``train_clp_adult.py`` (subspace attack: 10 Adam steps of size 10 on coefficients in the
  sensitive span; full attack: 50 Adam steps of size 1e-4 on loss − λ d²; λ update towards a
  mean fair distance ρ = 1e-3, λ in [1e-5, 10]; parameter step Adam 1e-5 at the attacked points;
  balanced batches of 1,000; 2,000 iterations), sensitive directions from liblinear L2 logistic
  regressions on the train split.

Run ``.venv/bin/python benchmarks/individual_adult_setup.py`` to print the data summary.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.linalg
import torch
from sklearn.linear_model import LogisticRegression
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairengine.datasets import load_adult

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
SEEDS = [
    (98539, 77708), (5192, 98047), (50057, 73349), (21440, 98448), (20609, 49100),
    (7751, 43757), (31228, 36230), (97561, 21758), (45413, 35730), (51668, 64395),
]  # fmt: skip
N_TRAIN = 36177
CONTINUOUS = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
DUMMIES = ["workclass", "marital_status", "occupation", "relationship", "sex", "race"]


def maity_adult(path: Path = DATA) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(X 45222 × 41, y, names): the authors' preprocessing (module docstring)."""
    frame = load_adult(path, split="both").frame
    keep = frame["native_country"].notna() & frame["occupation"].notna()
    f = frame.loc[keep].reset_index(drop=True)
    parts = [f[CONTINUOUS].astype(float)]
    for c in DUMMIES:
        d = pd.get_dummies(f[c].astype(str), prefix=c, prefix_sep="_").astype(float)
        if c == "sex":
            d = d[["sex_Male"]]
        elif c == "race":
            d = d[["race_White"]]
        parts.append(d)
    # sex and race go last (columns 39, 40), as in the authors' column order after the drops
    X = pd.concat(parts, axis=1)
    order = [c for c in X.columns if c not in ("sex_Male", "race_White")] + [
        "sex_Male",
        "race_White",
    ]
    X = X[order]
    return X.to_numpy(), f["income_gt_50k"].to_numpy().astype(np.int64), order


def split(X: np.ndarray, y: np.ndarray, seed_data: int) -> dict[str, np.ndarray]:
    """The aif360-style 80/20 split with legacy global-RNG permutation; standardised."""
    rs = np.random.RandomState(seed_data)
    perm = rs.permutation(X.shape[0])
    tr, te = perm[:N_TRAIN], perm[N_TRAIN:]
    Xtr, Xte = X[tr].copy(), X[te].copy()
    mu, sd = Xtr[:, :5].mean(0), Xtr[:, :5].std(0)
    Xtr[:, :5] = (Xtr[:, :5] - mu) / sd
    Xte[:, :5] = (Xte[:, :5] - mu) / sd
    return {
        "Xtr": Xtr[:, :39], "ytr": y[tr], "Str": Xtr[:, 39:].astype(int),
        "Xte": Xte[:, :39], "yte": y[te], "Ste": Xte[:, 39:].astype(int),
    }  # fmt: skip


def sensitive_directions(X: np.ndarray, S: np.ndarray, solver: str = "lbfgs") -> np.ndarray:
    """Coefficient vectors (2 × d) of logistic regressions of sex and race on X."""
    return np.stack(
        [LogisticRegression(solver=solver).fit(X, S[:, j]).coef_[0] for j in range(S.shape[1])]
    )


class MLP(nn.Module):
    """d-h(ReLU)-2 logits, optionally after a fixed projection x -> x P."""

    def __init__(self, d: int, hidden: int, projection: np.ndarray | None = None) -> None:
        super().__init__()
        self.hidden = nn.Linear(d, hidden)
        self.out = nn.Linear(hidden, 2)
        p = np.eye(d) if projection is None else projection
        self.register_buffer("projection", torch.as_tensor(p, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x @ self.projection.to(x.dtype))))


def _balanced_batches(y: np.ndarray, per_class: int, rng: np.random.Generator):
    idx0, idx1 = np.flatnonzero(y == 0), np.flatnonzero(y == 1)
    while True:
        yield np.concatenate([rng.choice(idx0, per_class), rng.choice(idx1, per_class)])


def train_mlp(
    X: np.ndarray, y: np.ndarray, *, hidden: int = 50, steps: int = 8000, lr: float = 1e-4,
    batch: int = 250, seed: int = 0, projection: np.ndarray | None = None,
) -> MLP:  # fmt: skip
    """Baseline / Project training (Adam, class-balanced batches)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = MLP(X.shape[1], hidden, projection)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)
    batches = _balanced_batches(y, batch // 2, rng)
    for _ in range(steps):
        b = next(batches)
        opt.zero_grad()
        nn.functional.cross_entropy(net(Xt[b]), yt[b]).backward()
        opt.step()
    return net.eval()


def orth_projection(directions: np.ndarray) -> np.ndarray:
    """I − AᵀA with A the orthonormalised rows of ``directions``."""
    q = scipy.linalg.orth(directions.T)
    return np.eye(directions.shape[1]) - q @ q.T


def train_reduction(X: np.ndarray, y: np.ndarray, S: np.ndarray, eps: float = 0.03):
    """fairlearn ExponentiatedGradient, equalized odds, sensitive = sex + 2 race."""
    from fairlearn.reductions import EqualizedOdds, ExponentiatedGradient

    eg = ExponentiatedGradient(
        LogisticRegression(solver="liblinear", class_weight="balanced"), EqualizedOdds(), eps=eps
    )
    eg.fit(X, y, sensitive_features=S[:, 0] + 2 * S[:, 1])
    return eg


def train_sensr(
    X: np.ndarray, y: np.ndarray, directions: np.ndarray, *, hidden: int = 100,
    epochs: int = 2000, batch: int = 1000, lr: float = 1e-5, lamb_init: float = 2.0,
    rho: float = 1e-3, adv_epoch: int = 10, adv_step: float = 10.0, adv_epoch_full: int = 50,
    l2_attack: float = 1e-4, seed: int = 0,
) -> MLP:  # fmt: skip
    """SenSR (Yurochkin et al. 2020) as in Maity et al.'s ``train_clp_adult.py`` (docstring)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    net = MLP(d, hidden)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    A = torch.as_tensor(directions, dtype=torch.float32)  # k × d, not orthonormalised
    fair = torch.as_tensor(orth_projection(directions), dtype=torch.float32)
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)
    lam = lamb_init
    batches = _balanced_batches(y, batch // 2, rng)
    ce = nn.functional.cross_entropy
    for _ in range(epochs):
        b = next(batches)
        xb, yb = Xt[b], yt[b]
        net.requires_grad_(False)
        t = torch.zeros(len(b), A.shape[0], requires_grad=True)
        opt_t = torch.optim.Adam([t], lr=adv_step)
        for _ in range(adv_epoch):
            opt_t.zero_grad()
            (-ce(net(xb + t @ A), yb)).backward()
            opt_t.step()
        x_sub = (xb + t @ A).detach()
        delta = torch.zeros_like(xb, requires_grad=True)
        opt_d = torch.optim.Adam([delta], lr=l2_attack)
        for _ in range(adv_epoch_full):
            opt_d.zero_grad()
            dist = ((delta @ fair) * delta).sum(1)
            (-(ce(net(x_sub + delta), yb) - lam * dist.mean())).backward()
            opt_d.step()
        net.requires_grad_(True)
        x_adv = (x_sub + delta).detach()
        dbar = float((((x_adv - xb) @ fair) * (x_adv - xb)).sum(1).mean())
        lam = min(10.0, max(1e-5, lam + max(dbar, rho) / max(min(dbar, rho), 1e-12) * (dbar - rho)))
        opt.zero_grad()
        ce(net(x_adv), yb).backward()
        opt.step()
    return net.eval()


def accuracy(p1: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(accuracy, balanced accuracy) of 1[p1 > 0.5]."""
    yhat = (p1 > 0.5).astype(int)
    return float((yhat == y).mean()), float(
        0.5 * ((yhat[y == 1] == 1).mean() + (yhat[y == 0] == 0).mean())
    )


if __name__ == "__main__":
    X, y, names = maity_adult()
    print(f"rows {X.shape[0]}, features {X.shape[1]}; last two {names[-2:]}")
    s = split(X, y, SEEDS[0][0])
    print(f"train {s['Xtr'].shape}, test {s['Xte'].shape}, positive rate {y.mean():.4f}")
