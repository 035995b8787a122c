"""Post-processing mitigation to an intersectional fairness target: the randomised thresholding
derived predictor (RTDP) of Morina et al. (arXiv:1911.01468), notes ``intersectional.md`` §1.5,
§4.6–4.8.

* :class:`RTDPPostProcessor`: the estimator (``fit`` / ``predict_proba`` / ``predict``), four
  variants (randomization_only, thresholds_only, sequential, overall), optional robust constraint.
* :func:`run_mitigation`: the audit step (calibration / held-out split, every variant, held-out ε
  with intervals, fairlearn comparison) returning a ``MethodResult``.
* :func:`registration_decision`: whether ``register_if`` allows registering the mitigated model
  (held-out ε point estimate / upper bound against the target).
* :func:`apply_rule`: apply a fitted rule (``details.postprocessor``, a
  :class:`~fairengine.mitigation.result.DeployedRule`, or its JSON) to a frame of raw attribute
  values and scores, as the deployed MLflow model does.
* :mod:`fairengine.mitigation.result`: the typed details (:class:`MitigationDetails`,
  :class:`DeployedMitigation`).
"""

from fairengine.mitigation.config import MitigationConfig
from fairengine.mitigation.lp import MitigationError, solve_rtdp_lp
from fairengine.mitigation.method import run_mitigation
from fairengine.mitigation.postprocessor import (
    VARIANTS,
    MitigationInfeasible,
    RTDPPostProcessor,
)
from fairengine.mitigation.registration import (
    REGISTER_POLICIES,
    RegistrationDecision,
    registration_decision,
)
from fairengine.mitigation.result import DeployedMitigation, DeployedRule, MitigationDetails
from fairengine.mitigation.rule import apply_rule

__all__ = [
    "REGISTER_POLICIES",
    "VARIANTS",
    "DeployedMitigation",
    "DeployedRule",
    "MitigationConfig",
    "MitigationDetails",
    "MitigationError",
    "MitigationInfeasible",
    "RTDPPostProcessor",
    "RegistrationDecision",
    "apply_rule",
    "registration_decision",
    "run_mitigation",
    "solve_rtdp_lp",
]
