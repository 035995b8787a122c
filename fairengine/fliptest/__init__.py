"""FlipTest (Black, Yeom & Fredrikson, FAT* 2020) with statistics: flipsets through optimal
transport maps, transparency reports, nulls, bootstrap refits and flip frequencies.

* :func:`run_fliptest` / :class:`FlipTestConfig` — the audit method (``methods.fliptest``).
* :func:`compute_flipsets`, :func:`flipset_masks`, :class:`Flipsets` — Definition 4.1.
* :func:`transparency_report`, :class:`TransparencyReport`, :func:`marginal_histograms` —
  Definition 4.3 and the flipset marginals.
* :func:`flip_test`, :class:`FlipTestResult`, :class:`FlipsetTest` — the statistics (§4.4 of
  ``fliptest_ot.md``).
* :class:`FlipRule`, :func:`class_transitions` — what a flip is for binary, regression (a change
  of the prediction by at least δ) and multiclass (a change of class) audits (issue 22).
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.fliptest.config import FlipTestConfig
    from fairengine.fliptest.flipsets import Flipsets, compute_flipsets, fit_images, flipset_masks
    from fairengine.fliptest.method import METHOD, run_fliptest
    from fairengine.fliptest.outcomes import FlipRule, class_transitions
    from fairengine.fliptest.statistics import FlipsetTest, FlipTestResult, flip_test
    from fairengine.fliptest.transparency import (
        TransparencyReport,
        marginal_histograms,
        sign_test,
        transparency_report,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FlipTestConfig": "config",
        "Flipsets": "flipsets",
        "compute_flipsets": "flipsets",
        "fit_images": "flipsets",
        "flipset_masks": "flipsets",
        "METHOD": "method",
        "run_fliptest": "method",
        "FlipRule": "outcomes",
        "class_transitions": "outcomes",
        "FlipsetTest": "statistics",
        "FlipTestResult": "statistics",
        "flip_test": "statistics",
        "TransparencyReport": "transparency",
        "marginal_histograms": "transparency",
        "sign_test": "transparency",
        "transparency_report": "transparency",
    },
)

__all__ = [
    "METHOD",
    "FlipRule",
    "FlipTestConfig",
    "FlipTestResult",
    "FlipsetTest",
    "Flipsets",
    "TransparencyReport",
    "class_transitions",
    "compute_flipsets",
    "fit_images",
    "flip_test",
    "flipset_masks",
    "marginal_histograms",
    "run_fliptest",
    "sign_test",
    "transparency_report",
]
