"""The intersectional audit: ε per metric over all intersections, with three estimators.

:func:`run_intersectional` counts the rows once into an
:class:`~fairengine.intersectional.cells.IntersectionTable`, then for the intersection of all
audited attributes and for each attribute alone (the marginal ε) computes

* the smoothed ε (point estimate, both outcome modes, plus the empirical α = β = 0 value),
* a multinomial-bootstrap distribution (B replicates of all metrics from the same draws),
* a Beta-posterior distribution (M draws),

and returns a :class:`~fairengine.results.MethodResult` named ``intersectional``. Each finding is
the smoothed ε of one metric for one grouping, keyed ``df_eps.<metric>.<grouping>`` (grouping
``<a>_x_<b>_x_…`` for the intersection, ``<a>`` for a marginal), with the headline interval:
Bayesian when the smallest auditable intersection has fewer than ``min_support`` rows in the
metric's denominator (where the percentile bootstrap under-covers, notes §4.4), else bootstrap.
DF bias amplification ε_sp − ε_slift (Foulds et al. 2020) is reported as
``df_amplification.<grouping>`` with a bootstrap interval. Findings are untested unless
``target_epsilon`` is set; then each tests H0: ε ≤ target_epsilon.

Every ε is named by its outcome convention (``outcomes``: the positive outcome only, as in Morina
et al.'s tables, or both outcomes, as Foulds et al. and AIF360 bound them): the label and reading
say which, and the reading and ``details.metrics.<metric>.<grouping>.convention``
(:class:`~fairengine.intersectional.metrics.EpsilonConventions`) give the point estimate under the
other convention beside it. Only the configured convention is tested; the other adds no finding.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd
from scipy import stats

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.finding_keys import intersection_token, key_token
from fairengine.intersectional.cells import IntersectionTable, collapse_counts, table_from_arrays
from fairengine.intersectional.config import IntersectionalConfig
from fairengine.intersectional.estimators import (
    EpsilonDistribution,
    bootstrap_statistics,
    posterior_epsilons,
    resolve_scheme,
)
from fairengine.intersectional.metrics import (
    CONVENTION_NAMES,
    DATA_METRICS,
    METRIC_NAMES,
    DifferentialFairness,
    EpsilonConventions,
    RateTable,
    differential_fairness,
    epsilon_from_counts,
)
from fairengine.intersectional.result import (
    BiasAmplification,
    EpsilonEstimators,
    EpsilonPair,
    EpsilonSummary,
    GroupingRates,
    IntersectionalDetails,
    IntersectionalEstimators,
    MetricEpsilon,
    RateColumns,
    SmallestIntersection,
    SmoothedEstimate,
)
from fairengine.results import Finding, Interval, MethodResult, ResamplingPart

if TYPE_CHECKING:
    from fairengine.streaming.tables import StreamedCounts

METHOD = "intersectional"
TITLE = "Intersectional differential fairness (ε over all intersections)"
#: Per-intersection arrays are kept in ``details`` up to this many intersections.
DETAILS_MAX_INTERSECTIONS = 200


class _Support(TypedDict):
    """Keyword arguments of :func:`differential_fairness` on sparse intersections."""

    min_support: int
    exclude_sparse: bool
    include_empty: bool


class _Smoothing(TypedDict):
    """The smoothing keyword arguments of the ε estimators."""

    alpha: float
    beta: float


def intersection_codes(
    dataset: AuditDataset,
    attributes: list[str] | None,
    bins: dict[str, Any],
    where: str = "methods.intersectional",
) -> tuple[list[str], list[tuple[str, ...]], list[np.ndarray]]:
    """Per-row integer codes of each attribute whose intersections are audited.

    ``attributes`` ``None`` means every protected attribute; a column in ``bins`` is cut into
    right-closed intervals (``pd.cut``). Returns ``(attributes, levels, codes)`` with
    ``levels[j][codes[j][i]]`` the label of row i on attribute j. ``where`` names the config
    section in errors.
    """
    attrs = list(attributes) if attributes is not None else list(dataset.roles.protected)
    codes, levels = [], []
    for a in attrs:
        if a in bins:
            c, lv = _bin_column(dataset, a, bins[a], where)
        elif a in dataset.groups:
            enc = dataset.groups[a]
            c, lv = enc.codes, enc.categories
        else:
            raise DataContractError(
                f"{where}.attributes names {a!r}, which is neither a protected "
                f"attribute ({list(dataset.groups)}) nor binned by {where}.bins"
            )
        codes.append(np.asarray(c))
        levels.append(tuple(lv))
    return attrs, levels, codes


def intersection_table(
    dataset: AuditDataset, config: IntersectionalConfig | None = None
) -> IntersectionTable:
    """Count ``dataset`` into the intersection table of ``config.attributes`` (binned by
    ``config.bins``), with the dataset's label, predictions (if any) and weights."""
    cfg = IntersectionalConfig() if config is None else config
    attrs, levels, codes = intersection_codes(dataset, cfg.attributes, cfg.bins)
    return table_from_arrays(
        attrs,
        levels,
        codes,
        dataset.label,
        dataset.prediction,
        dataset.weights,
        hard=dataset.threshold is not None,
        max_levels=cfg.max_levels,
        max_intersections=cfg.max_intersections,
    )


def _bin_column(
    dataset: AuditDataset, column: str, edges: list[float], where: str = "methods.intersectional"
) -> tuple[np.ndarray, tuple]:
    if column not in dataset.frame.columns:
        raise DataContractError(f"{where}.bins names a missing column {column!r}")
    x = pd.to_numeric(dataset.frame[column], errors="coerce").to_numpy(dtype=np.float64)
    return bin_values(x, edges, f"column {column!r}", f"{where}.bins.{column}")


def bin_values(
    x: np.ndarray, edges: list[float], what: str, key: str
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes of ``x`` in the right-closed bins of ``edges`` (first bin closed on the left) and
    the bin labels ``[a, b]``, ``(b, c]``, …; values outside the edges or missing raise
    :class:`DataContractError` naming ``what`` and the config ``key``."""
    x = np.asarray(x, dtype=np.float64)
    cut = pd.cut(x, bins=list(edges), right=True, include_lowest=True)
    codes = np.asarray(cut.codes, dtype=np.intp)
    if (codes < 0).any():
        bad = x[codes < 0][:3].tolist()
        raise DataContractError(
            f"{what}: {int((codes < 0).sum())} value(s) are missing or outside the "
            f"bin edges {list(edges)} of {key} (e.g. {bad})"
        )
    labels = tuple(
        f"{'[' if i == 0 else '('}{_num(lo)}, {_num(hi)}]"
        for i, (lo, hi) in enumerate(itertools.pairwise(edges))
    )
    return codes, labels


def _num(v: float) -> str:
    return f"{v:g}"


@dataclasses.dataclass(frozen=True)
class AuditSetup:
    """What every estimate of one intersectional run is computed over: the cell table, the
    metrics that can run, the groupings (the full intersection, then each attribute's
    marginal when ``marginals``) with their tables and kept axes, and the estimators' support
    and smoothing settings."""

    table: IntersectionTable
    metrics: list[str]
    warnings: list[str]
    groupings: list[tuple[str, list[int]]]
    tables: dict[str, IntersectionTable]
    keeps: dict[str, list[int]]
    common: _Support
    smooth: _Smoothing


def audit_setup(dataset: AuditDataset, cfg: IntersectionalConfig) -> AuditSetup:
    """The :class:`AuditSetup` of ``dataset`` under ``cfg`` (deterministic)."""
    return setup_from_table(intersection_table(dataset, cfg), cfg)


def setup_from_table(table: IntersectionTable, cfg: IntersectionalConfig) -> AuditSetup:
    """The :class:`AuditSetup` of a counted ``table`` under ``cfg`` (deterministic)."""
    warnings: list[str] = []
    metrics = [m for m in cfg.metrics if m in DATA_METRICS or table.has_predictions]
    skipped = [m for m in cfg.metrics if m not in metrics]
    if skipped:
        warnings.append(
            f"model metrics {skipped} skipped: the data has no scores (name roles.score or give "
            "a model)"
        )
    attrs = list(table.attributes)
    groupings: list[tuple[str, list[int]]] = [(intersection_token(attrs), [])]
    if cfg.marginals and len(attrs) > 1:
        groupings += [(key_token(a), [j]) for j, a in enumerate(attrs)]
    tables = {
        g: (table if not keep else table.marginal([attrs[j] for j in keep]))
        for g, keep in groupings
    }
    keeps = dict(groupings)
    common = _Support(
        min_support=cfg.min_support,
        exclude_sparse=cfg.exclude_sparse,
        include_empty=cfg.include_empty,
    )
    smooth = _Smoothing(alpha=cfg.smoothing_alpha, beta=cfg.smoothing_beta)
    return AuditSetup(table, metrics, warnings, groupings, tables, keeps, common, smooth)


def epsilon_statistic(
    setup: AuditSetup, cfg: IntersectionalConfig, grouping: str, metric: str, masks: Any
) -> Callable[[np.ndarray], np.ndarray]:
    """ε of ``metric`` over ``grouping`` as a function of resampled full-table counts
    ``(b, K, 2, 2) -> (b,)`` (the bootstrap's statistic), on the point estimate's ``masks``."""
    keep = setup.keeps[grouping]

    def f(c: np.ndarray) -> np.ndarray:
        cc = collapse_counts(c, setup.table.shape, keep) if keep else c
        return epsilon_from_counts(cc, metric, masks, outcomes=cfg.outcomes, **setup.smooth)

    return f


def run_intersectional(
    dataset: AuditDataset, config: IntersectionalConfig | None = None, *, seed: int = 0
) -> MethodResult:
    """Audit ε-differential fairness over all intersections (see the module docstring).

    Parameters
    ----------
    dataset : the audit dataset; model metrics need scores (else only elift/slift are run).
    config : :class:`IntersectionalConfig` (defaults when ``None``).
    seed : seed of the bootstrap and posterior draws.
    """
    start = time.perf_counter()
    cfg = IntersectionalConfig() if config is None else config
    return _intersectional_result(audit_setup(dataset, cfg), cfg, seed, dataset.threshold, start)


def run_intersectional_from_counts(
    counts: StreamedCounts, config: IntersectionalConfig | None = None, *, seed: int = 0
) -> MethodResult:
    """:func:`run_intersectional` from the count tables of a streamed audit
    (:class:`fairengine.streaming.StreamedCounts`): the same findings, since every estimator
    reads only the :class:`IntersectionTable`. Binned attributes (``bins``) need rows and are
    refused; bin them into a column of the data first."""
    start = time.perf_counter()
    cfg = IntersectionalConfig() if config is None else config
    if cfg.bins:
        raise DataContractError(
            f"methods.intersectional.bins {sorted(cfg.bins)} need rows; a streamed audit counts "
            "protected attributes only: write the binned column into the data"
        )
    table = counts.intersection_table(
        cfg.attributes, max_levels=cfg.max_levels, max_intersections=cfg.max_intersections
    )
    return _intersectional_result(setup_from_table(table, cfg), cfg, seed, counts.threshold, start)


def _intersectional_result(
    setup: AuditSetup,
    cfg: IntersectionalConfig,
    seed: int,
    threshold: float | None,
    start: float,
) -> MethodResult:
    """The method's result from its setup (rows or streamed counts)."""
    table, metrics, groupings = setup.table, setup.metrics, setup.groupings
    tables, common, smooth = setup.tables, setup.common, setup.smooth
    attrs = list(table.attributes)
    warnings = list(setup.warnings)
    other = "both" if cfg.outcomes == "positive" else "positive"

    # ---- point estimates (smoothed, both outcome modes, empirical) ----
    point: dict[tuple[str, str], DifferentialFairness] = {}
    extra: dict[tuple[str, str], dict[str, float]] = {}
    for g, _ in groupings:
        for m in metrics:
            try:
                df = differential_fairness(tables[g], m, outcomes=cfg.outcomes, **smooth, **common)
            except DataContractError as exc:
                warnings.append(f"{m} over {g}: not auditable ({exc})")
                continue
            point[(g, m)] = df
            extra[(g, m)] = {
                f"epsilon_{other}": differential_fairness(
                    tables[g], m, outcomes=other, **smooth, **common
                ).epsilon,
                "epsilon_empirical": differential_fairness(
                    tables[g], m, outcomes=cfg.outcomes, alpha=0.0, beta=0.0, **common
                ).epsilon,
            }
    if not point:
        raise DataContractError(
            f"no intersectional metric could be computed over {attrs}: " + "; ".join(warnings)
        )

    # ---- bootstrap: every (grouping, metric) and the amplification from the same draws ----
    seqs = np.random.SeedSequence(seed).spawn(2)
    boot_rng, bayes_rng = np.random.default_rng(seqs[0]), np.random.default_rng(seqs[1])
    scheme = resolve_scheme(table, cfg.bootstrap_scheme)

    statistics = {
        f"{g}|{m}": epsilon_statistic(setup, cfg, g, m, point[(g, m)].masks) for (g, m) in point
    }
    g0 = groupings[0][0]
    amplify = (g0, "sp") in point and (g0, "slift") in point
    if amplify:
        f_sp, f_sl = statistics[f"{g0}|sp"], statistics[f"{g0}|slift"]
        statistics["amplification"] = lambda c: f_sp(c) - f_sl(c)
    reps = bootstrap_statistics(table, statistics, cfg.n_bootstrap, rng=boot_rng, scheme=scheme)

    # ---- Bayesian: Beta posterior draws per grouping, shared between metrics ----
    post: dict[tuple[str, str], np.ndarray] = {}
    for g, _ in groupings:
        ms = [m for m in metrics if (g, m) in point]
        masks: dict[str, np.ndarray] = {}
        for m in ms:
            masks.update(point[(g, m)].masks)
        draws = posterior_epsilons(
            tables[g],
            ms,
            masks,
            cfg.n_posterior,
            prior=(cfg.prior_alpha, cfg.prior_beta),
            outcomes=cfg.outcomes,
            rng=bayes_rng,
        )
        for m in ms:
            post[(g, m)] = draws[m]

    # ---- findings and details ----
    level = cfg.confidence_level
    findings: list[Finding] = []
    detail_metrics: dict[str, dict[str, MetricEpsilon]] = {m: {} for m in metrics}
    rate_columns: dict[str, dict[str, RateColumns]] = {}
    rate_tables: dict[str, IntersectionTable] = {}
    for (g, m), df in point.items():
        t = tables[g]
        names = t.names()
        boot = EpsilonDistribution("bootstrap", df.epsilon, reps[f"{g}|{m}"], level, scheme)
        bayes = EpsilonDistribution("bayesian", df.epsilon, post[(g, m)], level, "beta-posterior")
        min_d = min(float(rt.rows[rt.mask].min()) for rt in df.rates.values())
        if cfg.headline == "auto":
            head = bayes if min_d < cfg.min_support else boot
        else:
            head = bayes if cfg.headline == "bayesian" else boot
        ci = head.confidence_interval()
        method_words = (
            f"Beta({cfg.prior_alpha:g}, {cfg.prior_beta:g}) posterior, equal-tailed, "
            f"M={cfg.n_posterior}"
            if head is bayes
            else f"percentile bootstrap ({scheme}), B={cfg.n_bootstrap}"
        )
        pair_txt = _pair_words(df, names)
        grouping_words = " × ".join(t.attributes)
        conv = EpsilonConventions.of(m, cfg.outcomes, df.epsilon, extra[(g, m)][f"epsilon_{other}"])
        reading = (
            f"{METRIC_NAMES[m][:1].upper()}{METRIC_NAMES[m][1:]} over {grouping_words} "
            f"({t.n_intersections} groups): ε ({conv.name}) = "
            f"{df.epsilon:.3f} (ratio e^-ε = {df.ratio:.3f}; {level:.0%} "
            f"{'credible' if head is bayes else 'bootstrap'} interval {ci.low:.3f} to "
            f"{ci.high:.3f}"
            + (f", posterior median {bayes.median:.3f}" if head is bayes else "")
            + f"), driven by {pair_txt}. "
            + conv.sentence()
        )
        if min_d < cfg.min_support:
            reading += (
                f" The smallest auditable group has {min_d:g} rows in the denominator (< "
                f"{cfg.min_support}): the bootstrap under-covers there, the Bayesian interval "
                "is the headline."
                if head is bayes
                else f" The smallest auditable group has {min_d:g} rows (< {cfg.min_support})."
            )
        finding = Finding(
            key=f"df_eps.{m}.{g}",
            label=f"Differential fairness ε ({conv.name}), {METRIC_NAMES[m]}: {grouping_words}",
            estimate=df.epsilon,
            interval=Interval(ci.low, ci.high, level, method_words),
            reading=reading,
        )
        if cfg.target_epsilon is not None:
            finding = dataclasses.replace(
                finding,
                pvalue=head.pvalue(cfg.target_epsilon),
                # a Monte-Carlo p-value: S of n bootstrap (posterior) draws with ε ≤ target;
                # the audit decides it through its resampling interval (fairengine.decisions)
                resampling=[
                    ResamplingPart(
                        "posterior" if head is bayes else "bootstrap",
                        int(np.sum(head.draws <= cfg.target_epsilon)),
                        int(head.n),
                    )
                ],
                null_hypothesis=(
                    f"ε_{m} over {grouping_words} ≤ {cfg.target_epsilon:g} ({conv.name})"
                ),
            )
        findings.append(finding)
        if not np.isfinite(extra[(g, m)]["epsilon_empirical"]):
            warnings.append(
                f"{m} over {grouping_words}: the empirical (unsmoothed) ε is infinite because a "
                f"group has a zero rate ({_zero_groups(df, names)}); the smoothed value is reported"
            )
        detail_metrics[m][g] = _metric_details(
            df, names, boot, bayes, head, extra[(g, m)], min_d, conv, cfg
        )
        if t.n_intersections <= DETAILS_MAX_INTERSECTIONS:
            rate_tables[g] = t
            columns = rate_columns.setdefault(g, {})
            for r, rt in df.rates.items():
                if r not in columns:
                    columns[r] = _rate_details(rt, cfg)

    amplification: BiasAmplification | None = None
    if amplify:
        sp, sl = point[(g0, "sp")].epsilon, point[(g0, "slift")].epsilon
        amp_other = extra[(g0, "sp")][f"epsilon_{other}"] - extra[(g0, "slift")][f"epsilon_{other}"]
        amp_conv = EpsilonConventions.of("sp", cfg.outcomes, sp - sl, amp_other)
        amp = EpsilonDistribution("bootstrap", sp - sl, reps["amplification"], level, scheme)
        ci = amp.confidence_interval()
        findings.append(
            Finding(
                key=f"df_amplification.{g0}",
                label=(
                    f"DF bias amplification ε_sp − ε_slift ({amp_conv.name}): {' × '.join(attrs)}"
                ),
                estimate=sp - sl,
                interval=Interval(ci.low, ci.high, level, f"percentile bootstrap ({scheme})"),
                reading=(
                    f"The model's statistical-parity ε minus the data's slift ε is {sp - sl:+.3f} "
                    f"({level:.0%} CI {ci.low:+.3f} to {ci.high:+.3f}); positive means the model "
                    f"amplifies the disparity in the labels. Both ε are {amp_conv.name}; "
                    f"under {amp_conv.other_name}: {amp_other:+.3f} (shown, not tested)."
                ),
            )
        )
        amplification = BiasAmplification(
            estimate=float(sp - sl),
            low=float(ci.low),
            high=float(ci.high),
            bootstrap_mean=float(amp.mean),
            outcomes=cfg.outcomes,
            convention=amp_conv.name,
            other_convention=amp_conv.other_name,
            estimate_other=float(amp_other),
        )
    details = IntersectionalDetails(
        attributes=tuple(attrs),
        levels={a: tuple(lv) for a, lv in zip(attrs, table.levels, strict=True)},
        n_intersections=int(table.n_intersections),
        n_rows=round(table.n_rows),
        prediction=table.prediction,
        threshold=threshold,
        weighted=bool(table.weighted),
        outcomes=cfg.outcomes,
        convention=CONVENTION_NAMES[cfg.outcomes],
        other_convention=CONVENTION_NAMES[other],
        groupings={g: tuple(attrs[j] for j in keep) or tuple(attrs) for g, keep in groupings},
        estimators=IntersectionalEstimators(
            smoothing=(float(cfg.smoothing_alpha), float(cfg.smoothing_beta)),
            prior=(float(cfg.prior_alpha), float(cfg.prior_beta)),
            n_bootstrap=int(cfg.n_bootstrap),
            bootstrap_scheme=scheme,
            n_posterior=int(cfg.n_posterior),
            confidence_level=float(level),
            headline=cfg.headline,
            seed=int(seed),
        ),
        smallest=_smallest(table, cfg.n_smallest, cfg.min_support),
        metrics=detail_metrics,
        rates={g: _grouping_rates(rate_tables[g], cols) for g, cols in rate_columns.items()},
        notes=(
            "Point estimates are the smoothed ε on the original data (not the bootstrap mean, "
            "which the max over pairs biases upwards).",
            "Percentile-bootstrap intervals under-cover when an intersection has only a few rows "
            "or positives (notes §4.4: 0.69 coverage at ~2 positives); the Bayesian interval is "
            "the headline there.",
            "Empty intersections are never imputed; they are listed, not audited.",
        ),
        bias_amplification=amplification,
    )
    names0 = table.names()
    sparse = int(
        sum(
            np.sum(rt.status == "sparse")
            for (g, _), df in point.items()
            if g == g0
            for rt in df.rates.values()
        )
    )
    excluded = sorted(
        {
            (r, names0[s])
            for (g, _), df in point.items()
            if g == g0
            for r, idx in df.excluded.items()
            for s in idx
        }
    )
    if excluded and not cfg.include_empty:
        shown = ", ".join(f"{n} ({r})" for r, n in excluded[:5])
        warnings.append(
            f"{len(excluded)} (intersection, rate) cells are empty or have no rows in the rate's "
            f"denominator and are left out of ε (e.g. {shown}); ε is then the disparity among "
            "the other intersections. Set include_empty for prior-only Bayesian rates there"
        )
    if sparse:
        warnings.append(
            f"{sparse} (intersection, rate) cells have fewer than {cfg.min_support} rows; they "
            "are included in ε and flagged sparse in the details"
        )
    return MethodResult(
        method=METHOD,
        title=TITLE,
        parameters={**_config_dict(cfg), "seed": seed},
        findings=findings,
        details=details,
        warnings=warnings,
        seconds=time.perf_counter() - start,
    )


def _config_dict(cfg: IntersectionalConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def _pair_words(df: DifferentialFairness, names: list[str]) -> str:
    rt = df.rates[df.component]
    hi, lo = df.pair
    what = {"base_rate": "base rate", "selection_rate": "selection rate"}.get(rt.rate, rt.rate)
    if lo < 0:
        return (
            f"{names[hi]} ({what} {rt.smoothed[hi]:.3f}, n={rt.rows[hi]:g}) versus the overall "
            f"rate {df.overall:.3f}" + (" on the negative outcome" if df.side == "negative" else "")
        )
    return (
        f"{names[hi]} ({what} {rt.smoothed[hi]:.3f}, n={rt.rows[hi]:g}) versus {names[lo]} "
        f"({rt.smoothed[lo]:.3f}, n={rt.rows[lo]:g})"
        + (" on the negative outcome" if df.side == "negative" else "")
    )


def _zero_groups(df: DifferentialFairness, names: list[str]) -> str:
    out = []
    for rt in df.rates.values():
        zero = rt.k <= 0
        if df.outcomes == "both":
            zero |= rt.k >= rt.d
        out += [
            f"{names[s]} ({rt.rate} {rt.k[s]:g}/{rt.d[s]:g})"
            for s in np.flatnonzero(rt.mask & zero)[:5]
        ]
    return ", ".join(out[:5]) or "n/a"


def _summary(dist: EpsilonDistribution, target: float | None) -> EpsilonSummary:
    ci = dist.confidence_interval()
    return EpsilonSummary(
        low=float(ci.low),
        high=float(ci.high),
        upper_bound=float(dist.upper_bound()),
        mean=float(dist.mean),
        median=float(dist.median),
        bias=float(dist.bias),
        n_draws=int(dist.n),
        prob_at_most_target=None if target is None else float(dist.prob_at_most(target)),
    )


def _metric_details(
    df: DifferentialFairness,
    names: list[str],
    boot: EpsilonDistribution,
    bayes: EpsilonDistribution,
    head: EpsilonDistribution,
    extra: dict[str, float],
    min_d: float,
    conv: EpsilonConventions,
    cfg: IntersectionalConfig,
) -> MetricEpsilon:
    hi, lo = df.pair
    rt = df.rates[df.component]
    if lo >= 0:
        rate_low = float(rt.smoothed[lo])
    else:
        assert df.overall is not None  # elift: the pair is (farthest intersection, overall)
        rate_low = float(df.overall)
    return MetricEpsilon(
        epsilon=float(df.epsilon),
        ratio=df.ratio,
        epsilon_empirical=float(extra["epsilon_empirical"]),
        epsilon_positive=_optional_float(extra.get("epsilon_positive")),
        epsilon_both=_optional_float(extra.get("epsilon_both")),
        outcomes=df.outcomes,
        headline=head.estimator,
        pair=EpsilonPair(
            high=names[hi],
            low=names[lo] if lo >= 0 else "overall",
            rate_high=float(rt.smoothed[hi]),
            rate_low=rate_low,
            side=df.side,
            component=df.component,
        ),
        min_denominator=min_d,
        estimators=EpsilonEstimators(
            smoothed=SmoothedEstimate(float(df.epsilon)),
            bootstrap=_summary(boot, cfg.target_epsilon),
            bayesian=_summary(bayes, cfg.target_epsilon),
        ),
        excluded={
            r: tuple(names[s] for s in idx)[:DETAILS_MAX_INTERSECTIONS]
            for r, idx in df.excluded.items()
        },
        sparse={
            r: tuple(names[s] for s in np.flatnonzero(x.status == "sparse"))[
                :DETAILS_MAX_INTERSECTIONS
            ]
            for r, x in df.rates.items()
        },
        convention=conv,
        overall_rate=_optional_float(df.overall),
    )


def _optional_float(x: float | None) -> float | None:
    return None if x is None else float(x)


def _floats(x: np.ndarray) -> tuple[float, ...]:
    return tuple(np.asarray(x, dtype=np.float64).tolist())


def _rate_details(rt: RateTable, cfg: IntersectionalConfig) -> RateColumns:
    """Per-intersection counts, smoothed rate, Beta-posterior credible interval and status."""
    g = (1 - cfg.confidence_level) / 2
    a = cfg.prior_alpha + rt.k
    b = cfg.prior_beta + np.maximum(rt.d - rt.k, 0)
    return RateColumns(
        k=_floats(np.round(rt.k, 6)),
        d=_floats(np.round(rt.d, 6)),
        rate=_floats(np.round(rt.smoothed, 6)),
        low=_floats(np.round(stats.beta.ppf(g, a, b), 6)),
        high=_floats(np.round(stats.beta.ppf(1 - g, a, b), 6)),
        status=tuple(str(x) for x in rt.status.tolist()),
    )


def _grouping_rates(t: IntersectionTable, columns: dict[str, RateColumns]) -> GroupingRates:
    """The per-intersection rates of one grouping (``columns``: rate name -> its columns)."""
    unknown = set(columns) - {"base_rate", "selection_rate", "tpr", "fpr"}
    if unknown:  # a new rate needs its field in GroupingRates
        raise TypeError(f"rates {sorted(unknown)} have no field in the intersectional details")
    return GroupingRates(
        group=tuple(t.names()),
        n=_floats(t.sizes()),
        attributes=tuple(t.attributes),
        base_rate=columns.get("base_rate"),
        selection_rate=columns.get("selection_rate"),
        tpr=columns.get("tpr"),
        fpr=columns.get("fpr"),
    )


def _smallest(
    table: IntersectionTable, k: int, min_support: int
) -> tuple[SmallestIntersection, ...]:
    n = table.sizes()
    names = table.names()
    pos = table.rows[:, 1, :].sum(axis=1)
    order = np.argsort(n, kind="stable")[:k]
    return tuple(
        SmallestIntersection(
            group=names[s],
            n=float(n[s]),
            positives=float(pos[s]),
            status="empty" if n[s] == 0 else ("sparse" if n[s] < min_support else "ok"),
        )
        for s in order
    )


__all__ = ["METHOD", "TITLE", "intersection_table", "run_intersectional"]
