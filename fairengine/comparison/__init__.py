"""Paired comparison of a candidate model's fairness gaps against a baseline's (same rows).

* :func:`compare_models` — simultaneous bounds on Δ = |g_cand| − |g_base| for every attribute,
  pair of groups and rate (selection rate, TPR, FPR), with non-inferiority ("not worse by more
  than δ") and "worse" decisions from a paired maxT bootstrap (:mod:`.compare` has the method).
* :class:`ComparisonResult`, :class:`ComparisonQuestion`, :class:`ComparisonDiagnostics`
  (:mod:`.result`), :class:`ComparisonResampling` and :class:`ComparisonInputError`
  (:mod:`.settings`).
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.comparison.compare import METRICS, compare_models
    from fairengine.comparison.record import (
        ComparedModel,
        ComparisonVerdict,
        ModelComparison,
        comparison_verdict,
    )
    from fairengine.comparison.result import (
        ComparisonDiagnostics,
        ComparisonQuestion,
        ComparisonResult,
    )
    from fairengine.comparison.settings import ComparisonInputError, ComparisonResampling

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "METRICS": "compare",
        "compare_models": "compare",
        "ComparisonDiagnostics": "result",
        "ComparisonQuestion": "result",
        "ComparisonResult": "result",
        "ComparisonInputError": "settings",
        "ComparisonResampling": "settings",
        "ComparedModel": "record",
        "ComparisonVerdict": "record",
        "ModelComparison": "record",
        "comparison_verdict": "record",
    },
)

__all__ = [
    "METRICS",
    "ComparedModel",
    "ComparisonDiagnostics",
    "ComparisonInputError",
    "ComparisonQuestion",
    "ComparisonResampling",
    "ComparisonResult",
    "ComparisonVerdict",
    "ModelComparison",
    "compare_models",
    "comparison_verdict",
]
