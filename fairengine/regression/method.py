"""The regression method of an audit (``task: regression``): per protected attribute, every
group's mean prediction, mean target, mean residual (bias), MAE, MSE and RMSE with intervals,
studentized permutation tests of the pairwise differences (DiCiccio et al. 2020, §3.3), the
Kolmogorov–Smirnov and Wasserstein-1 distances between the groups' predictions with permutation
p-values, optionally bounded group loss (Agarwal, Dudík & Wu 2019, §2), and ε-differential
fairness of the binned predictions per attribute and over their intersection (Foulds et al.
2020; :mod:`fairengine.regression.binned_epsilon`): the statistics are
:mod:`fairengine.regression`'s; this module picks the pairs and assembles the result.
"""

from __future__ import annotations

import time

import numpy as np

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.group_pairs import pair_seed, planned_pairs, untested_pairs_warning
from fairengine.multiclass.epsilon import MulticlassEpsilon
from fairengine.regression.binned_epsilon import binned_epsilons
from fairengine.regression.bounded_loss import bounded_group_loss
from fairengine.regression.config import RegressionConfig
from fairengine.regression.findings import epsilon_findings, regression_findings
from fairengine.regression.permutation import pair_permutation_tests
from fairengine.regression.result import RegressionAttribute, RegressionDetails
from fairengine.regression.summaries import group_summaries
from fairengine.results import MethodResult
from fairengine.setting_checks import config_parameters

METHOD = "regression_metrics"
TITLE = "Regression fairness (errors, bias and predictions by group)"


def run_regression_metrics(
    dataset: AuditDataset, config: RegressionConfig, *, seed: int = 0
) -> MethodResult:
    """The regression audit of ``dataset`` (a ``task="regression"`` dataset: ``label`` is the
    target, ``prediction`` the model's prediction). Findings: ``reg_group_<quantity>.<attr>.
    <group>`` (estimates with intervals, not tested), ``reg_<metric>.<attr>.<a>_<b>`` (the
    studentized permutation test of the difference; null: equal group means),
    ``reg_ks``/``reg_wasserstein`` (null: same distribution of predictions) and, with
    ``loss_bound``, ``reg_bgl_<loss>.<attr>.<group>`` (null: the group's mean loss ≤ ζ)."""
    start = time.perf_counter()
    if dataset.task != "regression" or dataset.prediction is None:
        raise DataContractError(
            f"{METHOD} audits regression models: build the dataset with task='regression' and "
            "a prediction column"
        )
    y, pred, w = dataset.label, dataset.prediction, dataset.weights
    attributes: list[RegressionAttribute] = []
    findings = []
    warnings: list[str] = []
    stream = 0
    for attr, enc in dataset.groups.items():
        codes = enc.codes.astype(np.intp)
        summaries = group_summaries(
            y,
            pred,
            codes,
            enc.categories,
            weights=w,
            confidence_level=config.confidence_level,
            attribute=attr,
        )
        sizes = enc.sizes()
        possible = enc.n_groups * (enc.n_groups - 1) // 2
        pairs = []
        for a, b in planned_pairs(sizes, config.max_pairs):
            pairs.append(
                pair_permutation_tests(
                    y,
                    pred,
                    codes,
                    enc.categories,
                    group_a=a,
                    group_b=b,
                    weights=w,
                    metrics=tuple(config.metrics),
                    distance_tests=config.distance_tests,
                    n_permutations=config.n_permutations,
                    alternative=config.alternative,
                    confidence_level=config.confidence_level,
                    seed=pair_seed(seed, stream),
                    attribute=attr,
                )
            )
            stream += 1
        warning = untested_pairs_warning(attr, len(pairs), enc.n_groups, METHOD)
        warnings += [warning] if warning else []
        bounded = None
        if config.loss_bound is not None:
            bounded = bounded_group_loss(
                y,
                pred,
                codes,
                enc.categories,
                bound=float(config.loss_bound),
                loss=config.loss,
                weights=w,
                confidence_level=config.confidence_level,
                attribute=attr,
            )
        attributes.append(
            RegressionAttribute(attr, summaries, tuple(pairs), len(pairs), possible, bounded)
        )
        findings += regression_findings(summaries, pairs, () if bounded is None else (bounded,))
    epsilon: tuple[MulticlassEpsilon, ...] = ()
    if config.epsilon_bins is not None:
        epsilon = binned_epsilons(
            pred,
            list(dataset.groups.values()),
            bins=config.epsilon_bins,
            weights=w,
            concentration=float(config.concentration),
            n_draws=config.epsilon_draws,
            confidence_level=config.confidence_level,
            seed=seed,
        )
        findings += epsilon_findings(epsilon)
    details = RegressionDetails(
        attributes=tuple(attributes),
        n_permutations=config.n_permutations,
        confidence_level=config.confidence_level,
        metrics=tuple(config.metrics),
        loss_bound=None if config.loss_bound is None else float(config.loss_bound),
        loss=config.loss,
        epsilon=epsilon,
    )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters=config_parameters(config),
        findings=findings,
        details=details,
        warnings=warnings,
        seconds=round(time.perf_counter() - start, 4),
    )
