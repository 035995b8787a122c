"""Subgroup scan: find the subgroups nobody declared, with a p-value that accounts for the search.

Public API: :func:`scan_subgroups` (conjunctions of single values up to a depth, calibrated
maximum, top-k with step-down adjusted p-values and simultaneous intervals), :func:`mdss_scan`
(MDSS value subsets, Zhang & Neill 2016), :func:`split_scan` (discover on one part of the rows,
estimate on the other), :func:`bernoulli_score` and the building blocks
:func:`code_features`, :func:`build_search_space`, :func:`cell_outcomes`, :class:`NullDraws`.
"""

from typing import TYPE_CHECKING

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.subgroup_scan.mdss import (
        MdssSubset,
        mdss_scan,
    )
    from fairengine.subgroup_scan.null import (
        MODES,
        NullDraws,
        null_covariance,
    )
    from fairengine.subgroup_scan.scan import (
        NullMaximum,
        ObservedScan,
        ScannedSubgroup,
        ScanResult,
        naive_pvalues,
        observed_scan,
        scan_space,
        scan_subgroups,
        select_top,
    )
    from fairengine.subgroup_scan.search_space import (
        Cells,
        CodedFeature,
        CodedFeatures,
        SearchSpace,
        Subgroup,
        SubgroupScanError,
        build_search_space,
        code_features,
        group_cells,
    )
    from fairengine.subgroup_scan.split import (
        HeldOutEstimate,
        SplitScanResult,
        split_scan,
    )
    from fairengine.subgroup_scan.statistics import (
        SIDES,
        STATISTICS,
        BernoulliScore,
        CellOutcomes,
        SubgroupMoments,
        bernoulli_score,
        cell_outcomes,
        extremeness,
        moments,
        z_statistics,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "MdssSubset": "mdss",
        "mdss_scan": "mdss",
        "MODES": "null",
        "NullDraws": "null",
        "null_covariance": "null",
        "NullMaximum": "scan",
        "ObservedScan": "scan",
        "ScannedSubgroup": "scan",
        "ScanResult": "scan",
        "naive_pvalues": "scan",
        "observed_scan": "scan",
        "scan_space": "scan",
        "scan_subgroups": "scan",
        "select_top": "scan",
        "Cells": "search_space",
        "CodedFeature": "search_space",
        "CodedFeatures": "search_space",
        "SearchSpace": "search_space",
        "Subgroup": "search_space",
        "SubgroupScanError": "search_space",
        "build_search_space": "search_space",
        "code_features": "search_space",
        "group_cells": "search_space",
        "HeldOutEstimate": "split",
        "SplitScanResult": "split",
        "split_scan": "split",
        "SIDES": "statistics",
        "STATISTICS": "statistics",
        "BernoulliScore": "statistics",
        "CellOutcomes": "statistics",
        "SubgroupMoments": "statistics",
        "bernoulli_score": "statistics",
        "cell_outcomes": "statistics",
        "extremeness": "statistics",
        "moments": "statistics",
        "z_statistics": "statistics",
    },
)

__all__ = [
    "MODES",
    "SIDES",
    "STATISTICS",
    "BernoulliScore",
    "CellOutcomes",
    "Cells",
    "CodedFeature",
    "CodedFeatures",
    "HeldOutEstimate",
    "MdssSubset",
    "NullDraws",
    "NullMaximum",
    "ObservedScan",
    "ScanResult",
    "ScannedSubgroup",
    "SearchSpace",
    "SplitScanResult",
    "Subgroup",
    "SubgroupMoments",
    "SubgroupScanError",
    "bernoulli_score",
    "build_search_space",
    "cell_outcomes",
    "code_features",
    "extremeness",
    "group_cells",
    "mdss_scan",
    "moments",
    "naive_pvalues",
    "null_covariance",
    "observed_scan",
    "scan_space",
    "scan_subgroups",
    "select_top",
    "split_scan",
    "z_statistics",
]
