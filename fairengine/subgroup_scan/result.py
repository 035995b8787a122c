"""The subgroup scan's typed details: the top subgroups as readable rules with their intervals
and step-down p-values, and the null distribution of the maximum (what its report view draws;
a lossless JSON round trip through :mod:`fairengine.result_codec`)."""

from __future__ import annotations

from dataclasses import dataclass

from fairengine.results import MethodDetails
from fairengine.subgroup_scan.scan import NullMaximum, ScannedSubgroup

#: Null maxima kept in the details for the report's histogram (the first ones drawn).
KEPT_MAXIMA = 2000


@dataclass(frozen=True)
class SubgroupScanDetails(MethodDetails):
    """Details of :func:`fairengine.subgroup_scan.method.run_subgroup_scan`.

    ``features``: the scanned columns (protected attributes first); ``n_subgroups`` the size
    of the search space; ``statistic``/``pvalue``: the scan maximum T and its calibrated
    p-value; ``naive_min_pvalue`` / ``bonferroni_pvalue``: what the best subgroup's unadjusted
    normal p-value and its Bonferroni correction say, for comparison; ``null``: the null
    distribution of the maximum (at most :data:`KEPT_MAXIMA` maxima kept); ``top``: the top-k
    non-overlapping subgroups."""

    statistic_name: str
    sides: str
    mode: str
    features: tuple[str, ...]
    depth: int
    min_size: int
    levels: int
    n_rows: int
    n_subgroups: int
    held_out: bool
    statistic: float
    pvalue: float
    naive_min_pvalue: float
    bonferroni_pvalue: float
    null: NullMaximum
    top: tuple[ScannedSubgroup, ...]
