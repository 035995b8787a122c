"""Steps a method declares to run after the audit is logged to MLflow.

Some methods produce something that belongs in the registry once the audit that justifies it
is logged: the mitigation step's post-processed model becomes a new model version, tagged
with that audit run. Such a step is declared here, in :data:`AFTER_LOGGING`, under the name
of its method (checked against :mod:`fairengine.registry` by the tests), instead of being a
special case in the flow: :func:`flows.audit.run_audit` calls every declared step whose
method is enabled, after logging, with a :class:`LoggedAudit`; the step returns an
:class:`AfterLoggingOutcome`: the result (a new one where the step records something in its
metadata; results are frozen) and what to merge into the run's MLflow information
(``AuditRun.mlflow``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prefect import get_run_logger

from fairengine.audit_context import MitigationRegistration
from fairengine.config import AuditConfig
from fairengine.errors import ResultLoggingError
from fairengine.results import AuditResult
from tasks.model import first_line


@dataclass(frozen=True)
class LoggedAudit:
    """What a step after logging gets: the config, the decided result, the audited model's
    registry identity, the column roles and the scored frame, and where the audit was
    logged."""

    config: AuditConfig
    result: AuditResult
    model_info: dict[str, Any]
    roles: Any
    frame: Any
    tracking_uri: str
    audit_run_id: str


@dataclass(frozen=True)
class AfterLoggingOutcome:
    """What a step after logging returns: the audit's result (with what the step recorded in
    its metadata) and the entries it adds to the run's MLflow information."""

    result: AuditResult
    outputs: dict[str, str] = dataclasses.field(default_factory=dict)


def register_mitigated(logged: LoggedAudit) -> AfterLoggingOutcome:
    """Register the mitigated model (``methods.mitigation.register``) after the audit is logged.

    Registered only when ``methods.mitigation.register_if`` allows it (the held-out ε against the
    target, ``details.registration``). The outcome, with its reason, is logged and kept in
    the returned result's ``metadata.mitigation_registration`` (``registered``, ``reason``,
    ``uri``) for the CLI. A failure here is reported (log and warning) but does not undo the
    logged audit.
    """
    from fairengine.mitigation.result import DeployedMitigation

    cfg, result, model_info = logged.config, logged.result, logged.model_info
    mcfg = cfg.methods.mitigation
    if not (mcfg.enabled and mcfg.register):
        return AfterLoggingOutcome(result)
    logger = get_run_logger()

    def recorded(outcome: MitigationRegistration) -> AuditResult:
        metadata = dataclasses.replace(result.metadata, mitigation_registration=outcome)
        return dataclasses.replace(result, metadata=metadata)

    def not_registered(reason: str) -> AfterLoggingOutcome:
        logger.warning("Mitigated model not registered because %s", reason)
        return AfterLoggingOutcome(recorded(MitigationRegistration(False, reason, None)))

    method = next((m for m in result.methods if m.method == "mitigation"), None)
    if method is None or method.status != "ok":
        why = "it did not run" if method is None else f"{method.status}: {method.reason}"
        return not_registered(f"the mitigation step did not succeed ({why})")
    details = method.details
    if not isinstance(details, DeployedMitigation):  # a result read from an older audit.json
        return not_registered(
            f"the mitigation result holds no fitted rule ({type(details).__name__})"
        )
    decision = details.registration
    if not decision.allowed:
        return not_registered(decision.reason)
    if not model_info.get("name"):
        return not_registered(
            "methods.mitigation.register needs model.uri to be a registry model "
            "(models:/name/version or models:/name@alias)"
        )
    from tasks.mitigated_model import register_mitigated_model

    features = list(logged.roles.features or ())
    inputs = list(dict.fromkeys([*features, *details.postprocessor.attributes]))
    try:
        info = register_mitigated_model(
            method,
            model_info,
            features,
            tracking_uri=logged.tracking_uri,
            audit_run_id=logged.audit_run_id,
            audit_id=result.audit_id,
            decision=decision,
            example=logged.frame[inputs].head(5),
        )
    except Exception as exc:
        raise ResultLoggingError(
            f"the audit was logged, but registering the mitigated model failed: "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from exc
    logger.info(
        "Registered the mitigated model as %s: %s (target met: %s)",
        info["uri"],
        decision.reason,
        decision.target_met,
    )
    registered = MitigationRegistration(registered=True, reason=decision.reason, uri=info["uri"])
    return AfterLoggingOutcome(recorded(registered), {"mitigated_model_uri": info["uri"]})


AfterLogging = Callable[[LoggedAudit], AfterLoggingOutcome]

AFTER_LOGGING: dict[str, AfterLogging] = {"mitigation": register_mitigated}
"""Method name -> its step after logging (run when the method is enabled)."""
