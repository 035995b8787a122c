"""The multiclass method of an audit (``task: multiclass``): per protected attribute, every
group's one-vs-rest selection rate, TPR and FPR of every class with Wilson intervals,
studentized permutation tests of their pairwise differences (DiCiccio et al. 2020, §3.3), the
total variation, Jensen–Shannon and Hellinger distances between the groups' predicted-class
distributions with permutation p-values, and ε-differential fairness over the K outcomes
(Foulds et al. 2020; Morina et al. 2019): the statistics are :mod:`fairengine.multiclass`'s;
this module picks the pairs and assembles the result.
"""

from __future__ import annotations

import time

import numpy as np

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.group_pairs import pair_seed, planned_pairs, untested_pairs_warning
from fairengine.multiclass.config import MulticlassConfig
from fairengine.multiclass.epsilon import differential_fairness
from fairengine.multiclass.findings import multiclass_findings
from fairengine.multiclass.permutation import pair_permutation_tests
from fairengine.multiclass.rates import group_class_rates
from fairengine.multiclass.result import MulticlassAttribute, MulticlassDetails
from fairengine.results import MethodResult
from fairengine.setting_checks import config_parameters

METHOD = "multiclass_metrics"
TITLE = "Multiclass fairness (per-class rates and predicted-class distributions by group)"


def read_predictions(dataset: AuditDataset, config: MulticlassConfig) -> np.ndarray:
    """What the statistics read as the prediction: the (n, K) probability matrix under
    ``probabilities: expected`` (an error naming the setting when the audit has none), the
    predicted class codes otherwise."""
    if config.probabilities == "expected":
        if dataset.class_probability is None:
            raise DataContractError(
                f"methods.{METHOD}.probabilities: expected reads class probabilities, and this "
                "audit has predicted classes only: name them with columns.class_scores "
                "({class: column}) or audit a model with predict_proba"
            )
        return dataset.class_probability
    assert dataset.prediction is not None
    return dataset.prediction


def prediction_reading(dataset: AuditDataset, config: MulticlassConfig) -> str:
    """How the statistics read the predictions, as the report says it: ``expected`` (expected
    counts of the probabilities), ``argmax`` (the most probable class: probabilities without
    a predicted-class column) or ``classes`` (the predicted classes as given)."""
    if config.probabilities == "expected":
        return "expected"
    if dataset.class_probability is not None and dataset.roles.score is None:
        return "argmax"
    return "classes"


def run_multiclass_metrics(
    dataset: AuditDataset, config: MulticlassConfig, *, seed: int = 0
) -> MethodResult:
    """The multiclass audit of ``dataset`` (``task="multiclass"``: ``label`` and ``prediction``
    are class codes of ``dataset.classes``). Findings: ``mc_group_<rate>.<class>.<attr>.<group>``
    (estimates with Wilson intervals, not tested), ``mc_<rate>.<class>.<attr>.<a>_<b>`` (the
    studentized permutation test of the difference; null: equal rates), ``mc_<tv|js|hellinger>.
    <attr>.<a>_<b>`` (null: the same predicted-class distribution) and ``mc_epsilon.<attr>``."""
    start = time.perf_counter()
    if dataset.task != "multiclass" or dataset.prediction is None:
        raise DataContractError(
            f"{METHOD} audits multiclass classifiers: build the dataset with task='multiclass' "
            "and a predicted-class column"
        )
    y, w, classes = dataset.label, dataset.weights, dataset.classes
    pred = read_predictions(dataset, config)
    mode = config.probabilities
    attributes: list[MulticlassAttribute] = []
    findings = []
    warnings: list[str] = []
    stream = 0
    for attr, enc in dataset.groups.items():
        codes = enc.codes.astype(np.intp)
        rates = group_class_rates(
            y,
            pred,
            codes,
            enc.categories,
            classes,
            confidence_level=config.confidence_level,
            weights=w,
            attribute=attr,
            probabilities=mode,
        )
        possible = enc.n_groups * (enc.n_groups - 1) // 2
        pairs = []
        for a, b in planned_pairs(enc.sizes(), config.max_pairs):
            pairs.append(
                pair_permutation_tests(
                    y,
                    pred,
                    codes,
                    enc.categories,
                    classes,
                    group_a=a,
                    group_b=b,
                    metrics=tuple(config.metrics),
                    distance_tests=config.distance_tests,
                    n_permutations=config.n_permutations,
                    alternative=config.alternative,
                    confidence_level=config.confidence_level,
                    seed=pair_seed(seed, stream),
                    weights=w,
                    attribute=attr,
                    probabilities=mode,
                )
            )
            stream += 1
        warning = untested_pairs_warning(attr, len(pairs), enc.n_groups, METHOD)
        warnings += [warning] if warning else []
        epsilon = differential_fairness(
            y,
            pred,
            codes,
            enc.categories,
            classes,
            concentration=config.concentration,
            confidence_level=config.confidence_level,
            seed=seed,
            weights=w,
            attribute=attr,
            probabilities=mode,
        )
        attributes.append(
            MulticlassAttribute(attr, rates, tuple(pairs), len(pairs), possible, epsilon)
        )
        findings += multiclass_findings(rates, pairs, epsilon)
    details = MulticlassDetails(
        attributes=tuple(attributes),
        classes=tuple(classes),
        probabilities=prediction_reading(dataset, config),
        n_permutations=config.n_permutations,
        confidence_level=config.confidence_level,
        metrics=tuple(config.metrics),
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
