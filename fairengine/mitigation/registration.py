"""Whether the mitigated model may be registered: the held-out ε against the target.

The rule is fitted to ε ≤ target on the calibration split; whether it keeps the target on data
it was not fitted on is what the held-out evaluation (:mod:`fairengine.mitigation.evaluation`)
estimates. Over the constrained metrics m, with the held-out point estimate ε̂_m and the
one-sided upper bound U_m (the ``confidence_level`` posterior quantile of ε_m), the target is met

* at the **upper bound** (``upper_bound``) when U_m ≤ target and ε̂_m ≤ target for every m: the
  held-out data certify the target at that level;
* at the **point** estimate (``point``) when ε̂_m ≤ target for every m, but not every U_m;
* not at all (``no``) otherwise (a NaN or infinite estimate never meets it).

``methods.mitigation.register_if`` (:data:`REGISTER_POLICIES`) says which level allows
registering the mitigated model: ``upper_bound`` (default), ``point``, or ``always``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fairengine.errors import ConfigError
from fairengine.mitigation.estimates import EpsilonEstimate
from fairengine.results import decode_float, encode_float

#: Values of ``methods.mitigation.register_if``, strictest first.
REGISTER_POLICIES = ("upper_bound", "point", "always")
#: Levels at which the target is met (:func:`target_met_level`), strongest first.
TARGET_MET_LEVELS = ("upper_bound", "point", "no")


def target_met_level(epsilon: Mapping[str, EpsilonEstimate], target: float) -> str:
    """``upper_bound``, ``point`` or ``no``: the level at which every metric's held-out ε meets
    ``target`` (module docstring). ``epsilon`` maps metric -> estimate, as
    :attr:`RuleEvaluation.epsilon`; an empty mapping meets nothing."""
    if not epsilon:
        return "no"
    if not all(e.estimate <= target for e in epsilon.values()):
        return "no"
    if all(e.upper_bound <= target for e in epsilon.values()):
        return "upper_bound"
    return "point"


@dataclass(frozen=True)
class RegistrationDecision:
    """Whether ``register_if`` allows registering the mitigated model, and why.

    allowed : the policy allows it (``methods.mitigation.register`` must also be true).
    policy : the ``register_if`` value applied.
    target_met : ``upper_bound``, ``point`` or ``no`` (:func:`target_met_level`).
    target, confidence_level : the target ε and the level of the upper bounds.
    point, upper_bound : held-out ε point estimate and one-sided upper bound per metric.
    reason : one sentence for logs, the CLI and the report.
    """

    allowed: bool
    policy: str
    target_met: str
    target: float
    confidence_level: float
    point: dict[str, float] = field(default_factory=dict)
    upper_bound: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "policy": self.policy,
            "target_met": self.target_met,
            "target": self.target,
            "confidence_level": self.confidence_level,
            "point": {m: encode_float(v) for m, v in self.point.items()},
            "upper_bound": {m: encode_float(v) for m, v in self.upper_bound.items()},
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RegistrationDecision:
        return cls(
            allowed=bool(d["allowed"]),
            policy=str(d["policy"]),
            target_met=str(d["target_met"]),
            target=float(d["target"]),
            confidence_level=float(d["confidence_level"]),
            point={m: _float(v) for m, v in d.get("point", {}).items()},
            upper_bound={m: _float(v) for m, v in d.get("upper_bound", {}).items()},
            reason=str(d.get("reason", "")),
        )


def registration_decision(
    epsilon: Mapping[str, EpsilonEstimate],
    target: float,
    policy: str,
    confidence_level: float,
) -> RegistrationDecision:
    """Apply ``policy`` (one of :data:`REGISTER_POLICIES`) to the held-out ε of the mitigated
    rule (``epsilon``: metric -> :class:`EpsilonEstimate`, as :attr:`RuleEvaluation.epsilon`).

    ``upper_bound`` allows registering when the target is met at the upper bound, ``point`` when
    it is met at least at the point estimate, ``always`` in every case; ``reason`` names the
    quantity that decided, its value and the target.
    """
    if policy not in REGISTER_POLICIES:
        raise ConfigError(
            f"methods.mitigation.register_if must be one of {list(REGISTER_POLICIES)}, "
            f"got {policy!r}"
        )
    level = target_met_level(epsilon, target)
    allowed = (
        policy == "always" or level == "upper_bound" or (policy == "point" and level == "point")
    )
    point = {m: float(e.estimate) for m, e in epsilon.items()}
    upper = {m: float(e.upper_bound) for m, e in epsilon.items()}
    return RegistrationDecision(
        allowed=allowed,
        policy=policy,
        target_met=level,
        target=float(target),
        confidence_level=float(confidence_level),
        point=point,
        upper_bound=upper,
        reason=_reason(policy, allowed, point, upper, target, confidence_level),
    )


def _reason(
    policy: str,
    allowed: bool,
    point: dict[str, float],
    upper: dict[str, float],
    target: float,
    confidence_level: float,
) -> str:
    """E.g. "the held-out ε_eo 95 % upper bound 0.812 exceeds the target 0.1 (point estimate
    ε_eo 0.111; register_if: upper_bound)"."""
    bound = f"{100 * confidence_level:g} % upper bound"
    if not point:
        return f"no held-out ε was estimated (register_if: {policy})"
    # the deciding quantity: the point estimates under register_if: point (or when they alone
    # fail the target), else the bounds
    if policy == "point" or (not allowed and all(v <= target for v in upper.values())):
        decide, decide_name, other, other_name = point, "point estimate", upper, bound
    else:
        decide, decide_name, other, other_name = upper, bound, point, "point estimate"
    failing = {m: v for m, v in decide.items() if not v <= target}
    shown = failing or decide
    plural = len(shown) > 1
    if failing:
        verb = "exceed" if plural else "exceeds"
    else:
        verb = "are within" if plural else "is within"
    listed = " and ".join(f"ε_{m} {decide_name} {_fmt(v)}" for m, v in shown.items())
    others = ", ".join(f"ε_{m} {_fmt(v)}" for m, v in other.items())
    return (
        f"the held-out {listed} {verb} the target {target:g} "
        f"({other_name} {others}; register_if: {policy})"
    )


def _fmt(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else str(x)


def _float(x: Any) -> float:
    v = decode_float(x)
    return float("nan") if v is None else float(v)
