"""FairEngine: statistically sound fairness audits of classification models.

The front door is one call (see README, "Python in one call")::

    import fairengine
    result = fairengine.audit(df, label="y", protected=["sex"], model=clf)

:func:`audit`, :func:`load_audit` and :class:`AuditResult` run and read the whole audit (data
validation, the methods, the report, MLflow); :func:`compare` (:class:`Comparison`) compares a
candidate model with a baseline on the same rows; they live in the orchestration layer
(:mod:`flows.python_api`) and are imported on first use, so ``import fairengine`` and every
statistics module under it stay free of Prefect, MLflow, Jinja2 and Great Expectations. This
file is the one place where ``fairengine`` refers upward (checked by
``tests/test_import_structure.py``).
"""

from __future__ import annotations

from typing import Any

FRONT_DOOR = ("audit", "compare", "load_audit", "AuditResult", "Comparison")


def __getattr__(name: str) -> Any:
    if name in FRONT_DOOR:
        from flows import python_api

        value = getattr(python_api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fairengine' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *FRONT_DOOR])
