r"""What counts as a flip for each audit task: :class:`FlipRule` (issue 22).

FlipTest (Black, Yeom & Fredrikson 2020, Definition 4.1) compares the model's outcome for a
source individual x with its outcome for the transported counterpart T(x). The paper defines the
flipsets for a binary classifier; the same test serves other models once "the outcome changed"
is defined:

* **binary** (and a regression model with ``threshold`` t, whose decision is f(x) > t): the
  outcome is the positive decision; F+ = {f(x) = 1, f(T x) = 0} (advantaged),
  F− = {f(x) = 0, f(T x) = 1} (disadvantaged).
* **regression with** ``delta`` δ > 0: the outcome is the prediction;

  .. math:: F^+ = \{x ∈ S : f(x) − f(T x) ≥ δ\}, \qquad F^- = \{x ∈ S : f(T x) − f(x) ≥ δ\},

  the individuals whose prediction is at least δ higher (F+, advantaged: moving them to the
  target group decreases their prediction by ≥ δ) or at least δ lower (F−: moving them
  increases it by ≥ δ) than their counterpart's. With f(x) = w·x and T(x) = x + s every
  individual changes by −w·s: F− is everyone when w·s ≥ δ, F+ everyone when w·s ≤ −δ, and
  both are empty when |w·s| < δ.
* **multiclass**: the outcome is the predicted class; the flipset is
  F = {x ∈ S : f(x) ≠ f(T x)} (kind ``changed``). Its members are counted per (from-class,
  to-class) transition, and per class k the one-vs-rest flipsets F_k^out = {f(x) = k ≠ f(T x)}
  and F_k^in = {f(x) ≠ k = f(T x)} (the binary F+ and F− of the decision "class k").

Every rule gives the flipsets as boolean masks over the source rows; the nulls, bootstrap
refits and transparency reports of :mod:`fairengine.fliptest.statistics` then treat each kind
of flipset the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairengine.errors import ConfigError

BINARY_KINDS = ("positive", "negative")
CHANGED_KINDS = ("changed",)


@dataclass(frozen=True)
class FlipRule:
    """How the model's outcomes for x and T(x) make the flipsets (module docstring).

    ``outcome``: ``decision`` (booleans: binary, or regression with a threshold),
    ``value`` (real predictions compared with ``delta``) or ``class`` (class codes).
    """

    outcome: str = "decision"
    delta: float | None = None

    def __post_init__(self) -> None:
        if self.outcome not in ("decision", "value", "class"):
            raise ConfigError(
                f"a flip rule's outcome must be decision, value or class, got {self.outcome!r}"
            )
        if self.outcome == "value" and (
            self.delta is None or not np.isfinite(self.delta) or not self.delta > 0
        ):
            raise ConfigError(
                f"methods.fliptest.delta must be a positive number, got {self.delta!r}"
            )

    @property
    def kinds(self) -> tuple[str, ...]:
        """The flipsets of one direction: ``positive``/``negative``, or ``changed``."""
        return CHANGED_KINDS if self.outcome == "class" else BINARY_KINDS

    def outcomes(self, values: np.ndarray) -> np.ndarray:
        """The model's outcomes as the array the masks compare (bool, float64 or int64)."""
        dtype = {"decision": bool, "value": np.float64, "class": np.int64}[self.outcome]
        return np.asarray(values, dtype=dtype)

    def masks(self, source: np.ndarray, mapped: np.ndarray) -> tuple[np.ndarray, ...]:
        """One boolean mask over the source rows per kind (:attr:`kinds`)."""
        s, m = self.outcomes(source), self.outcomes(mapped)
        if self.outcome == "decision":
            return s & ~m, ~s & m
        if self.outcome == "class":
            return (s != m,)
        assert self.delta is not None
        change = m - s
        return change <= -self.delta, change >= self.delta

    def rates(self, source: np.ndarray, mapped: np.ndarray) -> np.ndarray:
        """The flip rate of each kind (the masks' means; NaN for no rows)."""
        if len(source) == 0:
            return np.full(len(self.kinds), np.nan)
        return np.array([m.mean() for m in self.masks(source, mapped)])


BINARY = FlipRule()
"""The paper's rule: positive decisions of a binary classifier."""


def class_transitions(source: np.ndarray, mapped: np.ndarray, n_classes: int) -> np.ndarray:
    """Counts of (from-class, to-class) pairs: entry [i, j] is #{f(x) = i, f(T x) = j}; the
    diagonal holds the individuals whose class does not change."""
    s = np.asarray(source, dtype=np.int64)
    m = np.asarray(mapped, dtype=np.int64)
    flat = np.bincount(s * n_classes + m, minlength=n_classes * n_classes)
    return flat.reshape(n_classes, n_classes)
