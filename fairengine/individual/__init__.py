"""Individual fairness test of Maity, Xue, Yurochkin & Sun (ICLR 2021).

Fair metrics (sensitive subspace, SVD, FACE, EXPLORE, user Mahalanobis / discounted
directions), the gradient-flow attack (Algorithm 1, batched in torch), the mean loss-ratio and
error-rate-ratio tests, model adapters (torch modules, sklearn LogisticRegression / MLPClassifier
/ Pipelines converted to torch, black boxes), regression models (squared loss) and multiclass
classifiers (softmax cross-entropy) for the regression and multiclass audits
(:func:`task_model`, :class:`TorchTaskModel`), and the audit entry point
:func:`run_individual_fairness`.
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.individual.attack import FlowResult, gradient_flow, project_simplex
    from fairengine.individual.config import IndividualConfig
    from fairengine.individual.fair_metric import (
        DiscountedDirectionsMetric,
        EXPLOREMetric,
        FACEMetric,
        MahalanobisMetric,
        SensitiveSubspaceMetric,
        SVDSensitiveSubspaceMetric,
        explore_pairs,
    )
    from fairengine.individual.method import METHOD, run_individual_fairness
    from fairengine.individual.ratio_tests import (
        ErrorRateRatioResult,
        LossRatioResult,
        error_rate_ratio_test,
        loss_ratio_test,
    )
    from fairengine.individual.task_models import TorchTaskModel, task_loss, task_model
    from fairengine.individual.torch_models import (
        BlackBoxClassifier,
        ModelAdapter,
        TorchClassifier,
        as_differentiable_model,
        sklearn_to_torch,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "IndividualConfig": "config",
        "DiscountedDirectionsMetric": "fair_metric",
        "EXPLOREMetric": "fair_metric",
        "FACEMetric": "fair_metric",
        "MahalanobisMetric": "fair_metric",
        "SensitiveSubspaceMetric": "fair_metric",
        "SVDSensitiveSubspaceMetric": "fair_metric",
        "explore_pairs": "fair_metric",
        "FlowResult": "attack",
        "gradient_flow": "attack",
        "project_simplex": "attack",
        "ErrorRateRatioResult": "ratio_tests",
        "LossRatioResult": "ratio_tests",
        "error_rate_ratio_test": "ratio_tests",
        "loss_ratio_test": "ratio_tests",
        "METHOD": "method",
        "run_individual_fairness": "method",
        "BlackBoxClassifier": "torch_models",
        "ModelAdapter": "torch_models",
        "TorchClassifier": "torch_models",
        "as_differentiable_model": "torch_models",
        "sklearn_to_torch": "torch_models",
        "TorchTaskModel": "task_models",
        "task_loss": "task_models",
        "task_model": "task_models",
    },
)

__all__ = [
    "METHOD",
    "BlackBoxClassifier",
    "DiscountedDirectionsMetric",
    "EXPLOREMetric",
    "ErrorRateRatioResult",
    "FACEMetric",
    "FlowResult",
    "IndividualConfig",
    "LossRatioResult",
    "MahalanobisMetric",
    "ModelAdapter",
    "SVDSensitiveSubspaceMetric",
    "SensitiveSubspaceMetric",
    "TorchClassifier",
    "TorchTaskModel",
    "as_differentiable_model",
    "error_rate_ratio_test",
    "explore_pairs",
    "gradient_flow",
    "loss_ratio_test",
    "project_simplex",
    "run_individual_fairness",
    "sklearn_to_torch",
    "task_loss",
    "task_model",
]
