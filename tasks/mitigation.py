"""Pipeline step: RTDP mitigation (:mod:`fairengine.mitigation`).

The mitigated model itself (an MLflow pyfunc wrapping the audited model) and its registration
live in :mod:`tasks.mitigated_model`, which does not import Prefect, so serving it stays light.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from fairengine.dataset import AuditDataset
from fairengine.library_threads import follow_process_cap
from fairengine.mitigation import MitigationConfig, RegistrationDecision, run_mitigation
from fairengine.results import MethodResult


@task(name="mitigation", cache_policy=NO_CACHE)
def mitigation_task(dataset: AuditDataset, params: MitigationConfig, seed: int = 0) -> MethodResult:
    """Run :func:`fairengine.mitigation.run_mitigation` with the configured parameters."""
    with follow_process_cap():  # the flow's one level of parallelism
        result = run_mitigation(dataset, params, seed=seed)
    logger = get_run_logger()
    if result.status != "ok":
        logger.warning("Mitigation %s: %s", result.status, result.reason)
        return result
    after = result.details["after"]["epsilon"]
    logger.info(
        "Mitigation (%s, target ε=%g): held-out %s in %.1f s",
        params.deploy,
        params.epsilon,
        ", ".join(
            f"ε_{m} {e['estimate']:.3f} (upper {e['upper_bound']:.3f})" for m, e in after.items()
        ),
        result.seconds or 0.0,
    )
    decision = RegistrationDecision.from_dict(result.details["registration"])
    logger.info(
        "Mitigation target met: %s (%s)%s",
        decision.target_met,
        decision.reason,
        "" if not params.register or decision.allowed else "; the model will not be registered",
    )
    return result
