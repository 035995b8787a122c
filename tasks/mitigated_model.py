"""The mitigated model: the audited model followed by the fitted RTDP rule, as an MLflow pyfunc.

* :class:`MitigatedModel` scores the input with the base model, then applies the fitted
  per-intersection rule (:func:`fairengine.mitigation.apply_rule`); its output is P(ỹ = 1), the
  probability of a positive decision (draw ỹ ~ Bernoulli(P) to decide, or call ``predict`` with
  ``params={"decisions": True, "seed": ...}`` for 0/1 decisions).
* :func:`register_mitigated_model` logs it into the audit's MLflow run and registers it as a new
  version of the audited registered model, tagged with the audit that produced it and with
  whether its held-out ε met the target (:class:`fairengine.mitigation.RegistrationDecision`).

No Prefect import here: loading the model for serving needs only mlflow, numpy, pandas and
``fairengine``.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel

from fairengine.mitigation import RegistrationDecision, apply_rule
from fairengine.mitigation.result import DeployedMitigation
from fairengine.results import MethodResult

#: Model-version tags of a mitigated version.
MITIGATION_TAGS = {
    "of": "fairness.mitigation_of",
    "audit_id": "fairness.mitigation_audit_id",
    "audit_run_id": "fairness.mitigation_audit_run_id",
    "variant": "fairness.mitigation_variant",
    "target": "fairness.mitigation_target",
    # upper_bound / point / no (fairengine.mitigation.registration.target_met_level)
    "target_met": "fairness.mitigation_target_met",
    "register_if": "fairness.mitigation_register_if",
    "confidence_level": "fairness.mitigation_confidence_level",
    # per constrained metric m: <prefix>.<m>
    "heldout_epsilon": "fairness.mitigation_heldout_epsilon",
    "heldout_upper_bound": "fairness.mitigation_heldout_epsilon_upper",
}


class MitigatedModel(PythonModel):
    """The audited model followed by the fitted RTDP rule (module docstring).

    Input: a frame with the base model's feature columns and the rule's attribute columns.
    Output: P(ỹ = 1) per row, or 0/1 decisions with ``params={"decisions": True, "seed": s}``.
    """

    def load_context(self, context: Any) -> None:
        import mlflow

        self.base = mlflow.pyfunc.load_model(context.artifacts["base_model"])
        self.rule = json.loads(Path(context.artifacts["rule"]).read_text())

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> np.ndarray:
        from fairengine.scores import positive_class_scores, to_probability

        frame = pd.DataFrame(model_input)
        features = self.rule["feature_columns"]
        missing = [c for c in features if c not in frame.columns]
        if missing:
            raise ValueError(f"the mitigated model needs the feature column(s) {missing}")
        if self.rule.get("score_source"):  # the audit's score source: the audited scores
            from fairengine.model_scores import ModelInput, ScoreSource, source_scores

            source = ScoreSource.from_dict(self.rule["score_source"])
            inputs = ModelInput.from_dict(self.rule["model_input"]).prepare(frame)
            score = source_scores(self.base, source, inputs)
        else:  # a rule registered before score sources were recorded
            out = self.base.predict(frame[features])
            positive = positive_class_scores(out, len(frame))
            if positive is None:
                raise ValueError(
                    f"the base model returned output of shape {np.shape(out)} for {len(frame)} "
                    "rows; expected one score per row (or two class probabilities)"
                )
            score = positive
        score = to_probability(score, self.rule["score_type"])
        pi, unknown = apply_rule(self.rule, frame, score)
        if unknown:
            logging.getLogger(__name__).warning(
                "%d row(s) have a category unseen when the rule was fitted; they get the rule "
                "of the largest fitted intersection",
                unknown,
            )
        if params and params.get("decisions"):
            rng = np.random.default_rng(params.get("seed"))
            return (rng.random(pi.shape[0]) < pi).astype(np.int64)
        return pi


def register_mitigated_model(
    result: MethodResult,
    model_info: dict[str, Any],
    feature_columns: list[str],
    *,
    tracking_uri: str,
    audit_run_id: str,
    audit_id: str,
    decision: RegistrationDecision,
    example: pd.DataFrame | None = None,
) -> dict[str, str]:
    """Log the mitigated model into the audit run and register it as a new version of the
    audited registered model; returns ``{"uri", "name", "version"}``.

    ``decision`` (the result's ``details.registration``) supplies the tags saying whether
    the held-out ε met the target and its values; whether to register at all is the caller's
    choice (``methods.mitigation.register_if``).

    The rule file is ``details.postprocessor`` (:class:`~fairengine.mitigation.result.DeployedRule`)
    as JSON, plus ``feature_columns`` and the audit's score source.

    Raises ``ValueError`` when the audited model is not a registry model (``models:/name/...``)
    or the result holds no fitted rule.
    """
    import mlflow
    from mlflow import MlflowClient
    from mlflow.models import infer_signature

    name, version, base_uri = model_info.get("name"), model_info.get("version"), model_info["uri"]
    if not name or not version:
        raise ValueError(
            "methods.mitigation.register needs the audited model to be a registry model "
            f"(model.uri models:/name/version or models:/name@alias), got {base_uri!r}"
        )
    details = result.details
    if not isinstance(details, DeployedMitigation):
        raise ValueError(
            f"the mitigation result holds no fitted rule (details: {type(details).__name__})"
        )
    rule: dict[str, Any] = {
        **details.postprocessor.to_dict(),
        "feature_columns": list(feature_columns),
    }
    for key in ("score_source", "model_input"):  # score new rows as the audit scored its rows
        if model_info.get(key):
            rule[key] = model_info[key]
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    with tempfile.TemporaryDirectory(prefix="fairengine-mitigated-") as tmp:
        base_dir = mlflow.artifacts.download_artifacts(
            artifact_uri=f"models:/{name}/{version}", dst_path=str(Path(tmp) / "base")
        )
        rule_path = Path(tmp) / "rtdp_rule.json"
        rule_path.write_text(json.dumps(rule, indent=1))
        signature = None
        if example is not None:
            model = MitigatedModel()
            model.base = mlflow.pyfunc.load_model(base_dir)
            model.rule = rule
            signature = infer_signature(
                example,
                model.predict(None, example),
                params={"decisions": False, "seed": 0},
            )
        with mlflow.start_run(run_id=audit_run_id):
            info = mlflow.pyfunc.log_model(
                name="mitigated_model",
                python_model=MitigatedModel(),
                artifacts={"base_model": base_dir, "rule": str(rule_path)},
                registered_model_name=name,
                signature=signature,
                input_example=example,
            )
    new_version = str(info.registered_model_version)
    tags = {
        MITIGATION_TAGS["of"]: str(version),
        MITIGATION_TAGS["audit_id"]: audit_id,
        MITIGATION_TAGS["audit_run_id"]: audit_run_id,
        MITIGATION_TAGS["variant"]: str(rule.get("variant")),
        MITIGATION_TAGS["target"]: f"{','.join(rule.get('constraints', []))} "
        f"epsilon={rule.get('epsilon')}",
        **target_tags(decision),
    }
    for key, value in tags.items():
        client.set_model_version_tag(name, new_version, key, value)
    client.update_model_version(
        name,
        new_version,
        description=(
            f"FairEngine RTDP mitigation of version {version} (audit {audit_id}): "
            f"{rule.get('variant')} rule for {rule.get('constraints')} at "
            f"epsilon={rule.get('epsilon')}; {decision.reason}; target met on held-out data: "
            f"{decision.target_met}. Output: P(positive decision)."
        ),
    )
    return {"uri": f"models:/{name}/{new_version}", "name": str(name), "version": new_version}


def target_tags(decision: RegistrationDecision) -> dict[str, str]:
    """Model-version tags of the held-out check: the level at which the target was met, the
    policy, the confidence level, and the held-out point estimate and upper bound per metric."""
    tags = {
        MITIGATION_TAGS["target_met"]: decision.target_met,
        MITIGATION_TAGS["register_if"]: decision.policy,
        MITIGATION_TAGS["confidence_level"]: f"{decision.confidence_level:g}",
    }
    for m, v in decision.point.items():
        tags[f"{MITIGATION_TAGS['heldout_epsilon']}.{m}"] = f"{v:.6g}"
    for m, v in decision.upper_bound.items():
        tags[f"{MITIGATION_TAGS['heldout_upper_bound']}.{m}"] = f"{v:.6g}"
    return tags
