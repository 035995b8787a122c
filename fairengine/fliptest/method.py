"""FlipTest as an audit method: :func:`run_fliptest` (method name ``fliptest``).

For each protected attribute and pair of groups (a, b), both directions a → b and b → a: fit
the configured transport map, compute the flipsets F+ (advantaged: positive decision whose
counterpart is negative) and F− (disadvantaged), test their sizes against the self-map and
label-permutation nulls, bootstrap the map for intervals, transparency-report intervals, top
feature rank stability and per-individual flip frequency, and validate the map on held-out data
(:mod:`fairengine.transport.validation`). Details are kept small (counts, quantiles, binned
histograms; no individual rows).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from fairengine import progress, worker_processes
from fairengine.dataset import AuditDataset
from fairengine.devices import resolve_device
from fairengine.errors import ConfigError, DataContractError
from fairengine.finding_keys import key_token, pair_token, part_token
from fairengine.fliptest.config import FlipTestConfig, check_task, pair_threads
from fairengine.fliptest.flipsets import REFIT_EPSILON_FACTORS
from fairengine.fliptest.outcomes import BINARY, FlipRule, class_transitions
from fairengine.fliptest.result import (
    BootstrapRefits,
    ClassFlips,
    DirectionDetails,
    FeatureChange,
    FlipsetSummaries,
    FlipsetSummary,
    FlipTestDetails,
    ForwardReverseCounts,
    MapEntry,
    MapValidationFailure,
    MapValidationReport,
    MarginalHistogram,
    NullQuantiles,
    PairDetails,
    PredictionShift,
    TransparencySummaries,
    TransparencySummary,
)
from fairengine.fliptest.statistics import FlipTestResult, flip_test
from fairengine.fliptest.transparency import marginal_histograms
from fairengine.library_threads import small_problem_threads
from fairengine.multiplicity import adjust_pvalues
from fairengine.results import Artifact, Finding, Interval, MethodResult
from fairengine.transport._base import TransportConvergenceError, TransportMap, as_points
from fairengine.transport.persistence import MapCache

if TYPE_CHECKING:
    from fairengine.transport.validation import MapValidation

METHOD = "fliptest"
TITLE = "FlipTest: optimal-transport counterparts, flipsets and transparency reports"

IDENTITY_NOTE = (
    "For an exact bijection between equal-size samples, |F+| - |F-| equals the difference in "
    "positive decisions between the two groups (the demographic-parity count gap), so the "
    "asymmetry of the flipsets is no evidence beyond a demographic-parity test; what FlipTest "
    "adds is the size of the flipsets beyond that gap and who is in them."
)
NULL_HYPOTHESIS = (
    "flipset no larger than map noise (self-map null) or than under exchangeable group labels "
    "(permutation null)"
)
PREFIXES = {"positive": "fliptest_pos", "negative": "fliptest_neg", "changed": "fliptest_changed"}
"""The finding key prefix of each kind of flipset."""

PredictProba = Callable[[pd.DataFrame], Any]
"""The model as a function of a feature frame: P(y = 1) per row (binary), the prediction
(regression) or the predicted class (multiclass)."""


def flip_rule(dataset: AuditDataset, config: FlipTestConfig) -> FlipRule:
    """What a flip is in ``dataset``'s task (:mod:`fairengine.fliptest.outcomes`): the
    paper's decisions for a binary audit (``threshold`` on P(y = 1) in [0, 1]) and for a
    regression audit with ``threshold``; a change of the prediction by at least ``delta`` for
    a regression audit with ``delta``; a change of class for a multiclass audit. Raises
    :class:`ConfigError` naming the setting that is missing or does not apply."""
    task = dataset.task
    if task not in ("binary", "regression", "multiclass"):
        raise ConfigError(f"FlipTest is not defined for a {task} audit")
    check_task(config, task)
    if task == "regression" and config.delta is not None:
        return FlipRule("value", float(config.delta))
    if task == "multiclass":
        return FlipRule("class")
    return BINARY


def label_strata(dataset: AuditDataset) -> tuple[int, ...]:
    """The true-label strata of equalized-odds mode: 0 and 1, or a multiclass audit's class
    codes."""
    if dataset.task == "multiclass":
        return tuple(range(len(dataset.classes)))
    return (0, 1)


def map_device(config: FlipTestConfig) -> str:
    """The device the configured map runs on: ``config.device`` resolved for the torch maps
    (entropic, gan); ``"cpu"`` for the numpy maps (exact, linear), which ignore the setting.

    ``auto`` is CUDA when torch sees a GPU, except for entropic maps whose problems (at most
    ``max_per_group`` points a side) fit the CPU's numpy Sinkhorn loop
    (:data:`~fairengine.transport.entropic.NUMPY_MAX_ENTRIES`, 2,000 x 2,000): there one
    iteration costs less on the CPU than launching the GPU's kernels for it."""
    if config.estimator not in ("entropic", "gan"):
        return "cpu"
    from fairengine.transport.entropic import NUMPY_MAX_ENTRIES

    small = config.estimator == "entropic" and config.max_per_group**2 <= NUMPY_MAX_ENTRIES
    if config.device == "auto" and small:
        return "cpu"
    return resolve_device(config.device, "methods.fliptest.device")


MAP_MODULES = {
    "entropic": ("fairengine.transport.entropic", "fairengine.transport.entropic_batch"),
    "exact": ("fairengine.transport.exact",),
    "linear": ("fairengine.transport.linear",),
    "gan": ("fairengine.transport.gan",),
}
"""The modules of each configured map (``methods.fliptest.estimator``): torch for the entropic
and GAN maps, POT for the exact one."""


def pair_modules(config: FlipTestConfig) -> tuple[str, ...]:
    """What a pair of groups imports to run (:func:`make_estimator`'s map, the held-out
    validation with POT and torch): the modules worth importing ahead in the worker processes
    (``flows.method_steps.warm_worker_processes``), since this module imports them only on
    first use."""
    return (*MAP_MODULES.get(config.estimator, ()), "fairengine.transport.validation")


def make_estimator(config: FlipTestConfig, seed: int, device: str | None = None) -> TransportMap:
    """The transport map configured by ``config``, on ``device`` (default
    :func:`map_device`). Imports the map's module (torch or POT) here, on first use: an
    audit whose FlipTest comes from the cache never imports them."""
    from fairengine.transport import EntropicMap, ExactOTMap, GANMap, LinearOTMap

    device = map_device(config) if device is None else device
    # held, not rejected: halves and resamples of one group often have constant one-hot columns
    hold = "hold"
    if config.estimator == "entropic":
        return EntropicMap(
            epsilon=config.epsilon,
            epsilon_grid=tuple(config.epsilon_grid),
            device=device,
            random_state=seed,
            constant_features=hold,
        )
    if config.estimator == "exact":
        return ExactOTMap(cost=config.cost, constant_features=hold)
    if config.estimator == "linear":
        return LinearOTMap(constant_features=hold)
    return GANMap(
        epochs=config.gan_epochs,
        cost=config.cost,
        device=device,
        random_state=seed,
        constant_features=hold,
    )


def model_decider(
    dataset: AuditDataset,
    predict_proba: PredictProba,
    threshold: float | None,
    attribute: str,
    with_attribute: bool,
    rule: FlipRule = BINARY,
) -> ModelDecider:
    """The model's outcome as a function of feature points: ``decide(x, group)`` is
    ``predict_proba(x) > threshold`` for the rows ``x`` (in the dataset's feature order), with
    ``attribute`` set to ``group`` when the model reads it (``with_attribute``). With a
    regression ``rule`` (``outcome="value"``) it is the prediction itself, with a multiclass
    rule the predicted class as a code of ``dataset.classes`` (compared as text). Shared by the
    method and by the decision step's more-resamples path (:mod:`fairengine.fliptest.resampler`),
    so that both flip the same decisions. It keeps only what it needs of ``dataset`` (not its
    rows), so that it travels to a worker process cheaply."""
    raw = dataset.frame[attribute]
    return ModelDecider(
        columns=tuple(dataset.feature_columns),
        attribute=attribute,
        values={str(v.item() if isinstance(v, np.generic) else v): v for v in pd.unique(raw)},
        dtype=raw.dtype,
        class_index={c: i for i, c in enumerate(dataset.classes)},
        predict_proba=predict_proba,
        threshold=threshold,
        with_attribute=with_attribute,
        rule=rule,
        task=dataset.task,
    )


@dataclass(frozen=True)
class ModelDecider:
    """``decide(x, group)``: the model's outcome for feature points (:func:`model_decider`)."""

    columns: tuple[str, ...]
    attribute: str
    values: dict[str, Any]
    dtype: Any
    class_index: dict[str, int]
    predict_proba: PredictProba
    threshold: float | None
    with_attribute: bool
    rule: FlipRule
    task: str

    def __call__(self, x: np.ndarray, group: str) -> np.ndarray:
        df = pd.DataFrame(x, columns=list(self.columns))
        if self.with_attribute:
            df[self.attribute] = pd.Series([self.values[group]] * len(df), dtype=self.dtype)
        if self.rule.outcome == "class":
            return _class_codes(self.predict_proba(df), len(df), self.class_index)
        p = np.asarray(self.predict_proba(df), dtype=np.float64)
        if p.ndim == 2 and p.shape[1] in (1, 2):
            p = p[:, -1]
        what = "prediction" if self.task == "regression" else "probability"
        if p.shape != (len(df),) or not np.all(np.isfinite(p)):
            raise DataContractError(
                f"predict_proba must return one finite {what} per row (shape (n,) or (n, 2)); "
                f"got shape {p.shape}"
            )
        if self.rule.outcome == "value":
            return p
        assert self.threshold is not None
        return p > self.threshold


def _class_codes(output: Any, n: int, class_index: dict[str, int]) -> np.ndarray:
    """A multiclass model's predicted classes as codes of the audit's classes (compared as
    text, like :meth:`AuditDataset.from_frame`); an unknown class is an error naming it."""
    arr = np.asarray(output.to_numpy() if hasattr(output, "to_numpy") else output)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.shape != (n,):
        raise DataContractError(
            f"FlipTest: a multiclass model must predict one class per row; got shape {arr.shape}"
        )
    text = pd.Series(arr).map(lambda v: str(v.item() if isinstance(v, np.generic) else v))
    codes = text.map(class_index)
    if codes.isna().any():
        unknown = sorted(set(text[codes.isna()]))[:5]
        raise DataContractError(
            f"FlipTest: the model predicts class(es) {unknown} for transported rows that the "
            f"label never takes (its classes: {list(class_index)[:10]})"
        )
    return codes.to_numpy(dtype=np.int64)


def _not_run(reason: str, config: FlipTestConfig) -> MethodResult:
    return MethodResult(
        method=METHOD, title=TITLE, status="not_run", reason=reason, parameters=_params(config)
    )


def _params(config: FlipTestConfig) -> dict[str, Any]:
    return asdict(config)


def _quantiles(d: np.ndarray) -> NullQuantiles | None:
    if len(d) == 0:
        return None
    q = np.quantile(d, [0.05, 0.5, 0.95])
    return NullQuantiles(mean=float(d.mean()), q05=float(q[0]), q50=float(q[1]), q95=float(q[2]))


def _flipset_summary(res: FlipTestResult, kind: str, config: FlipTestConfig) -> FlipsetSummary:
    t = res.tests[kind]
    ci = t.confidence_interval(config.confidence_level)
    freq = res.flip_frequency[kind]
    return FlipsetSummary(
        count=t.count,
        rate=t.statistic,
        ci=(ci.low, ci.high),
        pvalue=t.pvalue,
        pvalue_permutation=t.pvalue_permutation,
        pvalue_selfmap=t.pvalue_selfmap,
        permutation_null=_quantiles(t.null_distribution),
        selfmap_null=_quantiles(t.selfmap_distribution),
        excess_flips=t.excess,
        minimum_detectable_rate=t.minimum_detectable(config.alpha),
        expected_size=float(freq.sum()) if config.n_bootstrap else None,
        stable_count=int(res.stable_mask(kind).sum()) if config.n_bootstrap else None,
        flip_frequency_histogram=tuple(
            int(c) for c in np.histogram(freq[freq > 0], np.linspace(0, 1, 11))[0]
        ),
    )


def _transparency_summary(
    res: FlipTestResult, kind: str, config: FlipTestConfig, names: list[str]
) -> TransparencySummary:
    """The transparency report of flipset ``kind``; the BH-adjusted p-values of its sign tests
    are NaN here and set over the whole pair by :func:`_with_sign_bh`."""
    level = config.confidence_level
    rep = res.reports[kind]
    md_ci = res.transparency_interval(kind, "mean_difference", level)
    c_ci = res.transparency_interval(kind, "consistency", level)
    order = np.argsort(-np.nan_to_num(np.abs(rep.mean_difference), nan=-1.0), kind="stable")
    return TransparencySummary(
        n=rep.n,
        ranking_mean_difference=tuple(rep.ranking("mean_difference")),
        ranking_consistency=tuple(rep.ranking("consistency")),
        rank_stability_mean_difference=res.rank_stability(kind, "mean_difference"),
        rank_stability_consistency=res.rank_stability(kind, "consistency"),
        features=tuple(
            FeatureChange(
                feature=names[j],
                mean_difference=float(rep.mean_difference[j]),
                mean_difference_ci=(md_ci[j].low, md_ci[j].high),
                consistency=float(rep.consistency[j]),
                consistency_ci=(c_ci[j].low, c_ci[j].high),
                sign_pvalue=float(rep.sign_pvalue[j]),
                sign_pvalue_bh=float("nan"),
            )
            for j in order[: config.top_features]
        ),
    )


def _direction_details(
    res: FlipTestResult,
    config: FlipTestConfig,
    names: list[str],
    target_outcome: np.ndarray,
    validation: dict[str, MapValidationReport | MapValidationFailure] | None,
    maps: tuple[MapEntry, ...],
    rule: FlipRule = BINARY,
    classes: tuple[str, ...] = (),
) -> DirectionDetails:
    """One direction's details; ``target_outcome`` is the model's outcome on the target
    sample (decisions, predictions or class codes, as ``rule`` reads them)."""
    fs = res.flipsets
    kinds = rule.kinds
    # marginals of the features that head either transparency ranking (keeps details small)
    shown = (
        list(
            dict.fromkeys(
                [c for k in kinds for c in res.reports[k].ranking()[: config.top_features]]
            )
        )
        or names[: config.top_features]
    )
    cols = [names.index(c) for c in shown]
    histograms = marginal_histograms(
        fs.x[:, cols], {k: fs.masks[k] for k in kinds}, shown, config.histogram_bins
    )
    decisions = rule.outcome == "decision"
    target_rate = float(np.mean(target_outcome)) if decisions else None
    shift = classes_out = None
    if rule.outcome == "value":
        assert rule.delta is not None
        change = fs.mapped_decision - fs.source_decision
        shift = PredictionShift(
            delta=rule.delta,
            mean_source=float(np.mean(fs.source_decision)),
            mean_mapped=float(np.mean(fs.mapped_decision)),
            mean_target=float(np.mean(target_outcome)),
            mean_change=float(np.mean(change)),
            unchanged_rate=float(np.mean(np.abs(change) < rule.delta)),
        )
    if rule.outcome == "class":
        k = len(classes)
        moves = class_transitions(fs.source_decision, fs.mapped_decision, k)
        off = moves - np.diag(np.diag(moves))
        classes_out = ClassFlips(
            classes=tuple(classes),
            transitions=tuple(tuple(int(c) for c in row) for row in moves),
            source_counts=tuple(int(c) for c in moves.sum(axis=1)),
            mapped_counts=tuple(int(c) for c in moves.sum(axis=0)),
            target_counts=tuple(int(c) for c in np.bincount(target_outcome, minlength=k)),
            flipped_out=tuple(int(c) for c in off.sum(axis=1)),
            flipped_in=tuple(int(c) for c in off.sum(axis=0)),
        )
    return DirectionDetails(
        source=fs.source,
        target=fs.target,
        n_source=fs.n,
        epsilon=res.epsilon or None,
        source_positive=int(fs.source_decision.sum()) if decisions else None,
        mapped_positive=int(fs.mapped_decision.sum()) if decisions else None,
        target_positive_rate=target_rate,
        net_flips=None if rule.outcome == "class" else fs.net,
        dp_count_gap=(
            float(fs.source_decision.sum() - target_rate * fs.n)
            if target_rate is not None
            else None
        ),
        permutation_null_from_reverse_refits=res.permutation_null_reused,
        bootstrap_refits=BootstrapRefits(
            batched=res.bootstrap_batched,
            refitted_one_by_one=config.n_bootstrap - res.bootstrap_batched,
        ),
        flipsets=FlipsetSummaries(**{k: _flipset_summary(res, k, config) for k in kinds}),
        transparency=TransparencySummaries(
            **{k: _transparency_summary(res, k, config, names) for k in kinds}
        ),
        histograms={
            name: MarginalHistogram(
                edges=tuple(h["edges"]),
                group=tuple(h["group"]),
                **{k: tuple(h[k]) for k in kinds},
            )
            for name, h in histograms.items()
        },
        validation=validation,
        maps=maps,
        prediction_shift=shift,
        class_flips=classes_out,
    )


def _with_sign_bh(
    fwd: DirectionDetails, rev: DirectionDetails
) -> tuple[DirectionDetails, DirectionDetails]:
    """The pair's two directions with the Benjamini-Hochberg adjusted p-values of all its
    transparency sign tests (both directions and flipsets)."""
    entries = [
        e for d in (fwd, rev) for _, report in d.transparency.items() for e in report.features
    ]
    adjusted = iter(adjust_pvalues([e.sign_pvalue for e in entries], "bh"))

    def adjust(report: TransparencySummary) -> TransparencySummary:
        features = tuple(replace(e, sign_pvalue_bh=float(next(adjusted))) for e in report.features)
        return replace(report, features=features)

    def direction(d: DirectionDetails) -> DirectionDetails:
        # in the order of ``entries``
        reports = {kind: adjust(report) for kind, report in d.transparency.items()}
        return replace(d, transparency=TransparencySummaries(**reports))

    first = direction(fwd)
    return first, direction(rev)


def map_artifact_name(attribute: str, source: str, target: str, stratum: str | None) -> str:
    """File name of a direction's map among the run's artifacts:
    ``map_<attribute>_<source>_to_<target>[_label_<y>].npz`` (names made path-safe)."""
    parts = [key_token(attribute), key_token(source), "to", key_token(target)]
    if stratum is not None:
        parts += ["label", key_token(stratum)]
    return "map_" + "_".join(parts) + ".npz"


def _map_entries(
    res: FlipTestResult, attribute: str, source: str, target: str, by_label: bool
) -> tuple[MapEntry, ...]:
    """One entry per stratum's observed map: its file (with a map cache), the cache key (the
    file's stem), the artifact name, and whether it was loaded instead of fitted."""
    out = []
    for s, m in res.maps.items():
        path, hit = res.map_files.get(s, (None, None))
        out.append(
            MapEntry(
                stratum=f"label_{s}" if by_label else "all",
                estimator=type(m).__name__,
                artifact=map_artifact_name(attribute, source, target, s if by_label else None),
                path=None if path is None else str(path),
                cache_key=None if path is None else path.stem,
                loaded_from_cache=hit,
            )
        )
    return tuple(out)


def map_artifacts(result: MethodResult) -> list[Artifact]:
    """The map files of a FlipTest result whose maps were saved in a map cache (for the MLflow
    edge to log under ``artifacts/fliptest/``)."""
    details = result.details
    if not isinstance(details, FlipTestDetails):
        return []
    return [
        Artifact(path=entry.path, name=entry.artifact)
        for pair in details.pairs
        for direction in pair.directions
        for entry in direction.maps
        if entry.path
    ]


def _words(kind: str) -> str:
    return {
        "positive": "advantaged (F+)",
        "negative": "disadvantaged (F-)",
        "changed": "changed-class (F)",
    }[kind]


def decision_threshold(dataset: AuditDataset, config: FlipTestConfig) -> float | None:
    """The threshold of FlipTest's decisions: on P(y=1) ``config.threshold``, else the
    dataset's, else 0.5; on a regression audit's prediction ``config.threshold`` (None with
    ``delta``); None in a multiclass audit."""
    if dataset.task != "binary":
        return config.threshold if dataset.task == "regression" else None
    if config.threshold is not None:
        return config.threshold
    return dataset.threshold if dataset.threshold is not None else 0.5


def _reading(
    kind: str, t: Any, attr: str, src: str, tgt: str, rule: FlipRule, on_prediction: float | None
) -> str:
    """What a flipset finding's rate means, in words, for the rule of the audit's task
    (``on_prediction``: the threshold of a regression audit's decisions, else None)."""
    who = f"{t.statistic:.1%} of {attr}={src} ({t.count} of {t.n}) "
    if rule.outcome == "class":
        return who + f"get a different predicted class than their transported counterpart in {tgt}"
    if rule.outcome == "value":
        side = "higher" if kind == "positive" else "lower"
        return who + (
            f"get a prediction at least {rule.delta:g} {side} than their transported "
            f"counterpart in {tgt}"
        )
    positive = (
        "a positive decision"
        if on_prediction is None
        else (f"a prediction above {on_prediction:g}")
    )
    negative = (
        "a negative decision"
        if on_prediction is None
        else (f"a prediction at most {on_prediction:g}")
    )
    if kind == "positive":
        return who + f"get {positive} their transported counterpart in {tgt} does not"
    return (
        who
        + f"get {negative} while their transported counterpart in {tgt} gets "
        + ("a positive one" if on_prediction is None else "one above it")
    )


def plan_pairs(
    dataset: AuditDataset, config: FlipTestConfig, seed: int
) -> tuple[list[_PairJob], list[str]]:
    """The group pairs FlipTest compares, in order, each with its own seed drawn from ``seed``
    (deterministic), and the warnings about groups and pairs left out."""
    attrs = list(config.attributes) if config.attributes is not None else list(dataset.groups)
    unknown = [a for a in attrs if a not in dataset.groups]
    if unknown:
        raise DataContractError(
            f"methods.fliptest.attributes {unknown} are not protected attributes of the dataset "
            f"({list(dataset.groups)})"
        )
    rng = np.random.default_rng(seed)
    eo = config.mode == "equalized_odds"
    warnings: list[str] = []
    jobs: list[_PairJob] = []
    for attr in attrs:
        enc = dataset.groups[attr]
        eligible = []
        for g, cat in enumerate(enc.categories):
            rows = enc.codes == g
            sizes = (
                [int(np.sum(rows & (dataset.label == y))) for y in label_strata(dataset)]
                if eo
                else [int(rows.sum())]
            )
            if min(sizes) < config.min_group_size:
                warnings.append(
                    f"FlipTest skips {attr}={cat!r}: {min(sizes)} rows"
                    + (" in a true-label stratum" if eo else "")
                    + f" < min_group_size={config.min_group_size}"
                )
            else:
                eligible.append((int(rows.sum()), g))
        largest_first = [g for _, g in sorted(eligible, key=lambda t: (-t[0], t[1]))]
        pairs = [tuple(sorted(p)) for p in itertools.combinations(largest_first, 2)]
        if len(pairs) > config.max_pairs:
            warnings.append(
                f"FlipTest tests the {config.max_pairs} pairs of the largest groups of {attr} "
                f"out of {len(pairs)} (methods.fliptest.max_pairs)"
            )
            pairs = pairs[: config.max_pairs]
        if not pairs:
            warnings.append(f"FlipTest: no pair of groups of {attr} large enough to test")
        for ga, gb in pairs:
            jobs.append(_PairJob(attr, ga, gb, int(rng.integers(2**31))))
    return jobs, warnings


def run_fliptest(
    dataset: AuditDataset,
    config: FlipTestConfig,
    *,
    seed: int = 0,
    predict_proba: PredictProba | None = None,
    map_cache: MapCache | None = None,
) -> MethodResult:
    """FlipTest (Black et al. 2020) with statistics, for every protected attribute and group pair.

    ``predict_proba`` maps a DataFrame of ``dataset.features`` (plus the protected attribute
    when ``config.protected_as_feature``) to P(y = 1). Without it the method is ``not_run``.
    ``map_cache`` (:class:`~fairengine.transport.MapCache`) saves every observed map (one per
    direction and label stratum) and loads it instead of refitting when the same estimator
    meets the same data again; ``details.pairs[*].directions[*].maps`` lists the files.
    Findings ``fliptest_pos.<attr>.<source>_<target>`` and ``fliptest_neg....`` give the flip
    rate with a bootstrap interval and the intersection-union p-value of both nulls (see
    :mod:`fairengine.fliptest.statistics`).
    """
    start = time.perf_counter()
    if not config.enabled:
        return _not_run("FlipTest is disabled in the configuration", config)
    if predict_proba is None:
        return _not_run(
            "FlipTest needs the model as a function of the features (predict_proba; a "
            "regression model's or multiclass classifier's predict) to score each individual's "
            "transported counterpart; none was given (a score column is not enough)",
            config,
        )
    if not callable(predict_proba):
        raise DataContractError(
            "predict_proba must be a callable DataFrame -> P(y=1) (a prediction or a class for "
            "regression and multiclass audits)"
        )
    rule = flip_rule(dataset, config)
    if not dataset.feature_columns:
        raise DataContractError("FlipTest needs feature columns; the dataset has none")
    x_all, names = as_points("features", dataset.features)
    constant = [names[j] for j in np.flatnonzero(np.ptp(x_all, axis=0) == 0)]
    if constant:
        raise DataContractError(
            f"FlipTest: feature(s) {constant} are constant over the whole dataset; drop them from "
            "the features (they carry no information for a transport map)"
        )
    threshold = decision_threshold(dataset, config)
    device = map_device(config)
    estimator = make_estimator(config, seed, device)
    findings: list[Finding] = []
    pair_details: list[PairDetails] = []
    jobs, warnings = plan_pairs(dataset, config, seed)
    deciders = {
        a: model_decider(dataset, predict_proba, threshold, a, config.protected_as_feature, rule)
        for a in {j.attr for j in jobs}
    }

    done = iter(range(1, len(jobs) + 1))  # next() is atomic under the GIL
    counts_lock = threading.Lock()
    in_workers: list[bool] = []
    on_gpu = device.startswith("cuda")

    def run(job: _PairJob) -> tuple[PairDetails, list[Finding], list[str]]:
        # the pair's refits hold the GIL (small problems): they run in a worker process when
        # one is available (fairengine.worker_processes), else on this thread; same result
        inputs = _PairInputs.of(
            job, dataset, config, pair_sample(job, dataset, config, x_all, names)
        )
        args = (inputs, config, names, estimator, deciders[job.attr], map_cache, rule)
        if on_gpu:  # kernels on a GPU do not hold the GIL; a worker would open a CUDA context
            out, hits, misses = _pair_in_worker(*args)
            in_worker = False
        else:
            out, hits, misses = worker_processes.run(_pair_in_worker, *args)
            in_worker = worker_processes.last_fallback() is None
        with counts_lock:
            in_workers.append(in_worker)
            if map_cache is not None and in_worker:  # a thread counted on this cache already
                map_cache.hits += hits
                map_cache.misses += misses
        progress.report(METHOD, "pairs of groups", next(done), len(jobs))
        return out

    threads = pair_threads(config)
    if threads > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=min(threads, len(jobs))) as pool:
            outcomes = list(pool.map(run, jobs))
    else:
        outcomes = [run(job) for job in jobs]
    for detail, pair_findings, pair_warnings in outcomes:  # in job order: deterministic
        pair_details.append(detail)
        findings += pair_findings
        warnings += pair_warnings

    if not pair_details:
        raise DataContractError(
            "FlipTest found no pair of groups to compare: " + "; ".join(warnings)
        )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters={
            **_params(config),
            "device": device,
            "device_requested": config.device,
            "pair_threads": threads,
            "pairs_in_worker_processes": sum(in_workers),
            "threshold_used": threshold,
            "seed": seed,
        },
        findings=findings,
        details=FlipTestDetails(
            estimator=config.estimator,
            mode=config.mode,
            threshold=threshold,
            features=tuple(names),
            identity_note=IDENTITY_NOTE,
            units="transparency differences in pooled standard deviations of each pair",
            pairs=tuple(pair_details),
            task=dataset.task,
            flip=rule.outcome,
            delta=rule.delta,
            classes=tuple(dataset.classes),
        ),
        warnings=warnings,
        seconds=time.perf_counter() - start,
    )


def _validate(
    estimator: TransportMap,
    res: FlipTestResult,
    xs: np.ndarray,
    xt: np.ndarray,
    ss: np.ndarray,
    st: np.ndarray,
    decide: Callable[[np.ndarray, str], np.ndarray] | None,
    target: str,
    config: FlipTestConfig,
    rng: np.random.Generator,
    feature_names: list[str],
) -> dict[str, MapValidationReport | MapValidationFailure]:
    """Held-out validation (§4.3) of the map of each stratum, with the observed ε.

    The validation refits on 80 % of each sample; if Sinkhorn does not converge there at the
    observed ε it is retried at the wider ε of the refits (:data:`REFIT_EPSILON_FACTORS`,
    recorded as ``epsilon_used``); if none converges the stratum's entry holds the ``error``
    and a warning instead of stopping FlipTest. ``decide`` None (outcomes that are not
    decisions: regression with δ, multiclass) leaves out the decision-rate checks."""
    from fairengine.transport.validation import validate_map

    out: dict[str, MapValidationReport | MapValidationFailure] = {}
    for s in np.unique(ss):
        eps = res.epsilon.get(str(s))
        tunable = eps is not None and "epsilon" in estimator.get_params()
        factors = (1.0, *REFIT_EPSILON_FACTORS) if tunable else (1.0,)
        key = "all" if len(np.unique(ss)) == 1 else f"label_{s}"
        seed = int(rng.integers(2**31))
        error = None
        for factor in factors:
            eps_used = eps * factor if tunable and eps is not None else None  # (tunable: eps set)
            est = clone(estimator).set_params(epsilon=eps_used) if tunable else estimator
            try:
                v = validate_map(
                    est,
                    xs[ss == s],
                    xt[st == s],
                    decide=None if decide is None else (lambda x: decide(x, target)),
                    n_permutations=199,
                    cycle=config.estimator != "gan",
                    feature_names=list(feature_names),
                    confidence_level=config.confidence_level,
                    random_state=seed,
                )
            except TransportConvergenceError as exc:
                error = str(exc)
                continue
            extra = (
                [f"validation refits converged only at {factor:g}x the observed epsilon"]
                if factor != 1.0
                else []
            )
            out[key] = _validation_report(v, eps_used, extra)
            break
        else:
            out[key] = MapValidationFailure(
                error=error, passed=False, warnings=(f"map validation failed: {error}",)
            )
    return out


def _validation_report(
    v: MapValidation, epsilon_used: float | None, extra_warnings: list[str]
) -> MapValidationReport:
    """The details of one stratum's validation; ``passed`` is that of ``v`` (before the
    ``extra_warnings``, which say how it converged)."""
    return MapValidationReport(
        n_fit=(int(v.n_fit[0]), int(v.n_fit[1])),
        n_test=(int(v.n_test[0]), int(v.n_test[1])),
        features=tuple(v.features),
        ks=tuple(float(x) for x in v.ks),
        ks_null_q95=tuple(float(x) for x in v.ks_null_q95),
        ks_pvalue=tuple(float(x) for x in v.ks_pvalue),
        energy=float(v.energy),
        energy_pvalue=float(v.energy_pvalue),
        mse_ratio=tuple(None if x is None else float(x) for x in v.mse_ratio),
        cost_ratio=float(v.cost_ratio),
        monotonicity_violation=float(v.monotonicity_violation),
        positive_rate_gap=None if v.positive_rate_gap is None else float(v.positive_rate_gap),
        positive_rate_gap_ci=(
            None
            if v.positive_rate_gap_ci is None
            else (float(v.positive_rate_gap_ci[0]), float(v.positive_rate_gap_ci[1]))
        ),
        exact_agreement=None if v.exact_agreement is None else float(v.exact_agreement),
        cycle_error=None if v.cycle_error is None else float(v.cycle_error),
        warnings=(*v.warnings, *extra_warnings),
        passed=v.passed,
        epsilon_used=epsilon_used,
    )


@dataclass
class _PairJob:
    """One group pair of one attribute, with everything it needs (run in a worker thread)."""

    attr: str
    ga: int
    gb: int
    seed: int


@dataclass
class PairSample:
    """The rows one group pair is tested on: features of each group (``xa``, ``xb``, after
    ``max_per_group`` subsampling), their strata (true labels in equalized-odds mode, else
    zeros), the pooled SD per feature (``scale``), warnings, and the pair's generator after
    the draws (the directions' seeds come from it)."""

    xa: np.ndarray
    xb: np.ndarray
    strata_a: np.ndarray
    strata_b: np.ndarray
    scale: np.ndarray
    warnings: list[str]
    rng: np.random.Generator


def pair_sample(
    job: _PairJob,
    dataset: AuditDataset,
    config: FlipTestConfig,
    x_all: np.ndarray,
    names: list[str],
) -> PairSample:
    """The rows of ``job``'s pair, drawn from ``job.seed`` (deterministic)."""
    attr, ga, gb = job.attr, job.ga, job.gb
    rng = np.random.default_rng(job.seed)
    enc = dataset.groups[attr]
    eo = config.mode == "equalized_odds"
    warnings: list[str] = []
    idx = {}
    for g in (ga, gb):
        rows = np.flatnonzero(enc.codes == g)
        if len(rows) > config.max_per_group:
            rows = np.sort(rng.choice(rows, config.max_per_group, replace=False))
        idx[g] = rows
    if config.estimator == "exact":  # equal sizes per stratum: the paper's bijection
        for y in label_strata(dataset) if eo else (None,):
            sel = {g: idx[g] if y is None else idx[g][dataset.label[idx[g]] == y] for g in (ga, gb)}
            k = min(len(sel[ga]), len(sel[gb]))
            for g in (ga, gb):
                if len(sel[g]) > k:
                    drop = rng.choice(sel[g], len(sel[g]) - k, replace=False)
                    idx[g] = np.setdiff1d(idx[g], drop)
    xa, xb = x_all[idx[ga]], x_all[idx[gb]]
    strata = {
        g: (dataset.label[idx[g]].astype(int) if eo else np.zeros(len(idx[g]), int))
        for g in (ga, gb)
    }
    scale = np.vstack([xa, xb]).std(axis=0)
    const = [names[j] for j in np.flatnonzero(~(scale > 0))]
    if const:  # e.g. a rare one-hot category absent from both groups
        warnings.append(
            f"FlipTest holds feature(s) {const} fixed for {attr}: "
            f"{enc.categories[ga]!r} vs {enc.categories[gb]!r}: constant in both groups"
        )
        scale = np.where(scale > 0, scale, 1.0)
    return PairSample(xa, xb, strata[ga], strata[gb], scale, warnings, rng)


def _pair_in_worker(
    inputs: _PairInputs,
    config: FlipTestConfig,
    names: list[str],
    estimator: TransportMap,
    decide: Callable[[np.ndarray, str], np.ndarray],
    map_cache: MapCache | None,
    rule: FlipRule,
) -> tuple[tuple[PairDetails, list[Finding], list[str]], int, int]:
    """:func:`_pair_outcome` with the numeric libraries on one thread (every product of a pair
    is small at the default sizes), plus the map cache's hits and misses of this call (a worker
    process counts on its own copy of the cache)."""
    hits, misses = (0, 0) if map_cache is None else (map_cache.hits, map_cache.misses)
    with small_problem_threads(float(config.max_per_group) ** 2):
        out = _pair_outcome(inputs, config, names, estimator, decide, map_cache, rule)
    if map_cache is None:
        return out, 0, 0
    return out, map_cache.hits - hits, map_cache.misses - misses


def _run_pair(
    job: _PairJob,
    dataset: AuditDataset,
    config: FlipTestConfig,
    x_all: np.ndarray,
    names: list[str],
    estimator: TransportMap,
    decide: Callable[[np.ndarray, str], np.ndarray],
    map_cache: MapCache | None,
    rule: FlipRule = BINARY,
) -> tuple[PairDetails, list[Finding], list[str]]:
    """Both directions of one group pair: (pair details, findings, warnings). Deterministic
    given ``job.seed``, whatever thread or worker process runs it."""
    return _pair_outcome(
        _PairInputs.of(job, dataset, config, pair_sample(job, dataset, config, x_all, names)),
        config,
        names,
        estimator,
        decide,
        map_cache,
        rule,
    )


@dataclass(frozen=True)
class _PairInputs:
    """What :func:`_pair_outcome` needs of the dataset for one pair (not its rows)."""

    job: _PairJob
    sample: PairSample
    groups: tuple[str, str]
    task: str
    classes: tuple[Any, ...]
    on_prediction: float | None  # a regression rule's decision threshold, for the readings

    @classmethod
    def of(
        cls, job: _PairJob, dataset: AuditDataset, config: FlipTestConfig, sample: PairSample
    ) -> _PairInputs:
        cats = dataset.groups[job.attr].categories
        return cls(
            job,
            sample,
            (cats[job.ga], cats[job.gb]),
            dataset.task,
            tuple(dataset.classes),
            decision_threshold(dataset, config) if dataset.task == "regression" else None,
        )


def _pair_outcome(
    inputs: _PairInputs,
    config: FlipTestConfig,
    names: list[str],
    estimator: TransportMap,
    decide: Callable[[np.ndarray, str], np.ndarray],
    map_cache: MapCache | None,
    rule: FlipRule = BINARY,
) -> tuple[PairDetails, list[Finding], list[str]]:
    """:func:`_run_pair` after the pair's rows are drawn; runs in a worker process
    (:mod:`fairengine.worker_processes`) or on the calling thread, with the same result."""
    job, sample = inputs.job, inputs.sample
    attr = job.attr
    rng, xa, xb = sample.rng, sample.xa, sample.xb
    strata = {job.ga: sample.strata_a, job.gb: sample.strata_b}
    ga, gb, scale = job.ga, job.gb, sample.scale
    findings: list[Finding] = []
    warnings = list(sample.warnings)
    eo = config.mode == "equalized_odds"
    a_name, b_name = inputs.groups
    directions: list[DirectionDetails] = []
    shared = None  # the first direction's permutation refits, inverted (entropic)
    for src, tgt, xs, xt, ss, st in (
        (a_name, b_name, xa, xb, strata[ga], strata[gb]),
        (b_name, a_name, xb, xa, strata[gb], strata[ga]),
    ):
        res = flip_test(
            estimator,
            xs,
            xt,
            decide,
            src,
            tgt,
            strata_s=ss,
            strata_t=st,
            scale=scale,
            features=names,
            n_permutations=config.n_permutations,
            n_selfmap=config.n_selfmap,
            n_bootstrap=config.n_bootstrap,
            stable_threshold=config.stable_threshold,
            seed=int(rng.integers(2**31)),
            map_cache=map_cache,
            permutation_null=shared,
            rule=rule,
        )
        shared = res.reverse_permutation_null
        target_outcome = rule.outcomes(decide(xt, tgt))
        validation = None
        if config.validate:
            check = decide if rule.outcome == "decision" else None
            validation = _validate(estimator, res, xs, xt, ss, st, check, tgt, config, rng, names)
            for v in validation.values():
                warnings += [f"FlipTest map {src}->{tgt}: {w}" for w in v.warnings]
        maps = _map_entries(res, attr, src, tgt, eo)
        directions.append(
            _direction_details(
                res, config, names, target_outcome, validation, maps, rule, inputs.classes
            )
        )
        on_prediction = inputs.on_prediction
        for kind in rule.kinds:
            prefix = PREFIXES[kind]
            t = res.tests[kind]
            ci = t.confidence_interval(config.confidence_level)
            mdr = t.minimum_detectable(config.alpha)
            top = res.reports[kind].ranking("mean_difference")[0] if t.count else None
            findings.append(
                Finding(
                    key=f"{prefix}.{part_token(attr)}.{pair_token(src, tgt)}",
                    label=f"FlipTest {_words(kind)} rate, {attr}: {src} -> {tgt}",
                    estimate=t.statistic,
                    interval=Interval(ci.low, ci.high, config.confidence_level, "bootstrap refits"),
                    pvalue=None if np.isnan(t.pvalue) else t.pvalue,
                    null_hypothesis=NULL_HYPOTHESIS,
                    resampling=t.resampling_parts(),
                    reading=(
                        _reading(kind, t, attr, src, tgt, rule, on_prediction)
                        + f" ({config.confidence_level:.0%} CI {ci.low:.1%} to "
                        f"{ci.high:.1%}); {t.excess:+.0f} flips beyond the null mean, "
                        f"smallest detectable rate {mdr:.1%}"
                        + (f"; top feature: {top}" if top else "")
                        + "."
                    ),
                )
            )
    # BH over the transparency sign tests of this pair (both directions and flipsets)
    fwd, rev = _with_sign_bh(*directions)
    detail = PairDetails(
        attribute=attr,
        groups=(a_name, b_name),
        n=(len(xa), len(xb)),
        directions=(fwd, rev),
        # forward/reverse consistency: F+(a->b) vs F-(b->a) and F-(a->b) vs F+(b->a)
        forward_reverse_counts=_forward_reverse(fwd, rev),
    )
    return detail, findings, warnings


def _forward_reverse(fwd: DirectionDetails, rev: DirectionDetails) -> ForwardReverseCounts:
    """Forward/reverse consistency: F+(a->b) vs F-(b->a) and F-(a->b) vs F+(b->a), or the
    changed classes of both directions."""
    f, r = fwd.flipsets, rev.flipsets
    if f.changed is not None and r.changed is not None:
        return ForwardReverseCounts(changed_vs_reverse_changed=(f.changed.count, r.changed.count))
    assert f.positive and f.negative and r.positive and r.negative
    return ForwardReverseCounts(
        positive_vs_reverse_negative=(f.positive.count, r.negative.count),
        negative_vs_reverse_positive=(f.negative.count, r.positive.count),
    )
