r"""Uncertainty for flipsets (``../shared/docs/fliptest_ot.md`` §4.4): nulls, bootstrap refits,
per-individual flip frequency. None of this is in the paper.

For one direction S → S′ with n source rows, the statistics are the flip rates |F+|/n, |F−|/n.

* **Null 1, map noise (self-map).** Split S at random into halves A₁, A₂ (within each stratum),
  fit the same estimator A₁ → A₂ and count flips of A₁, with the model seeing the source group
  for both. Any flip is estimator/sampling noise (plus ε-bias for the entropic map). Halves are
  smaller than S, so this null is, if anything, too wide (conservative).
  Entropic refits of all halves run batched (one stabilized Sinkhorn loop over the replicates,
  :func:`~fairengine.transport.entropic_batch.split_refits`).
* **Null 2, exchangeability (label permutation).** Pool S ∪ S′, permute the group label (within
  strata), refit, count flips of the pseudo-source, the model seeing the source group for both
  sides. This is the null "features independent of the protected attribute and the model blind
  to it" under which FlipTest should find only noise.
* p-values (Monte-Carlo, valid at any R): p = (1 + #{null ≥ observed}) / (R + 1), per null. The
  reported p-value is the larger of the two: an intersection-union test, level α for "the
  flipset is no larger than map noise OR than under exchangeability". Excess flips = observed −
  null mean (count scale). The minimum detectable rate is the null's (1 − α) quantile.
  Entropic OT is symmetric, so each permutation refit of S → S′ also gives, through its
  inverse map, a draw of the S′ → S null; the reverse direction uses those draws instead of
  refitting (half the cost of the largest part of FlipTest).
* **Bootstrap.** Resample individuals within each group (and stratum) with replacement, refit the
  map, recompute flip rates and transparency reports: percentile intervals for the rates, each
  feature's mean difference and consistency, and the rank stability of the top feature (share
  of replicates in which it stays first). For the entropic map a resample is a reweighting of
  the fitted points, so all replicates are solved together in one batched Sinkhorn
  (:mod:`fairengine.transport.entropic_batch`; the observed map's standardization and ε in cost
  units, its potentials as the warm start), about 6x faster per replicate at 2,000 per group;
  replicates the batch cannot serve are refitted one by one.
* **Per-individual flip frequency.** In each bootstrap refit every original source individual is
  mapped (out-of-sample) and its flip recorded; only individuals flipped in at least
  ``stable_threshold`` of the refits are listed as stable flips, and the expected flipset size
  is the sum of frequencies.
* Equalized-odds mode: everything is done within true-label strata and pooled.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

import numpy as np
from sklearn.base import clone

from fairengine.fliptest.flipsets import Decide, Flipsets, fit_images
from fairengine.fliptest.outcomes import BINARY, BINARY_KINDS, FlipRule
from fairengine.fliptest.transparency import (
    TransparencyReport,
    transparency_report,
    transparency_vectors,
)
from fairengine.results import ResamplingPart
from fairengine.transport._base import TransportMap
from fairengine.transport.persistence import MapCache

if TYPE_CHECKING:
    from fairengine.transport.entropic import EntropicMap


def _entropic(m: object) -> TypeGuard[EntropicMap]:
    """Whether ``m`` is an :class:`~fairengine.transport.entropic.EntropicMap`, without
    importing its module (torch): no object is one unless that module was imported."""
    module = sys.modules.get("fairengine.transport.entropic")
    return module is not None and isinstance(m, module.EntropicMap)


KINDS = BINARY_KINDS
"""The flipsets of the paper's binary rule (other tasks: :attr:`FlipRule.kinds`)."""
DECIDE_ROWS = 200_000
"""Rows per stacked call of the model when scoring the replicates' points."""
BATCH_MAX_ENTRIES = 120_000_000
"""Largest source x target size whose bootstrap refits run batched (its float64 kernel, a
transposed copy and the cost matrix take about 24 bytes per entry: ~2.9 GB here); larger
problems are refitted one by one."""


class ConfidenceInterval(NamedTuple):
    """``(low, high)`` like scipy's ``ConfidenceInterval``."""

    low: float
    high: float


@dataclass
class FlipsetTest:
    """Test and interval for one flipset rate (scipy.stats-like result object).

    ``statistic`` is the observed rate |F|/n; ``null_distribution`` the permutation null rates,
    ``selfmap_distribution`` the self-map null rates, ``bootstrap_distribution`` the bootstrap
    rates; ``pvalue`` = max(``pvalue_permutation``, ``pvalue_selfmap``).
    """

    kind: str
    statistic: float
    count: int
    n: int
    null_distribution: np.ndarray
    selfmap_distribution: np.ndarray
    bootstrap_distribution: np.ndarray
    pvalue_permutation: float
    pvalue_selfmap: float

    @property
    def pvalue(self) -> float:
        ps = [p for p in (self.pvalue_permutation, self.pvalue_selfmap) if not math.isnan(p)]
        return max(ps) if ps else math.nan

    @property
    def null_mean(self) -> float:
        """Larger of the two null means (rate)."""
        means = [
            float(np.mean(d)) for d in (self.null_distribution, self.selfmap_distribution) if len(d)
        ]
        return max(means) if means else math.nan

    @property
    def excess(self) -> float:
        """Observed count minus the (larger) null mean count."""
        return self.count - self.null_mean * self.n

    def resampling_parts(self) -> list[ResamplingPart]:
        """The two Monte-Carlo nulls behind ``pvalue`` as exceedance counts (S of n refits with
        a rate ≥ the observed one), for the audit's sequential decisions."""
        out = []
        for name, null in (
            ("permutation", self.null_distribution),
            ("self-map", self.selfmap_distribution),
        ):
            if len(null):
                s = int(np.sum(np.asarray(null) >= self.statistic - 1e-12))
                out.append(ResamplingPart(name, s, len(null)))
        return out

    def minimum_detectable(self, alpha: float = 0.05) -> float:
        """Smallest rate that would reject at ``alpha``: the larger null (1 − α) quantile."""
        qs = [
            float(np.quantile(d, 1 - alpha))
            for d in (self.null_distribution, self.selfmap_distribution)
            if len(d)
        ]
        return max(qs) if qs else math.nan

    def confidence_interval(self, confidence_level: float = 0.95) -> ConfidenceInterval:
        """Bootstrap percentile interval of the rate (refits of the map included)."""
        return _percentile(self.bootstrap_distribution, confidence_level)


@dataclass
class PermutationNull:
    """Permutation-null flip rates (R x 2: F+, F−) of one direction and the frozen relative ε
    per stratum of the refits that produced them (:func:`flip_test`)."""

    rates: np.ndarray
    epsilon: dict[str, float]

    def usable(self, n_permutations: int, epsilon: dict[str, float]) -> bool:
        """Draws of the same size, from refits at the same ε, as a direction would make."""
        return len(self.rates) == n_permutations and self.epsilon == epsilon


def _percentile(sample: np.ndarray, level: float) -> ConfidenceInterval:
    s = np.asarray(sample, dtype=np.float64)
    if s.size == 0 or np.all(np.isnan(s)):
        return ConfidenceInterval(math.nan, math.nan)
    a = (1 - level) / 2
    return ConfidenceInterval(float(np.nanquantile(s, a)), float(np.nanquantile(s, 1 - a)))


def _pvalue(null: np.ndarray, observed: float) -> float:
    if len(null) == 0:
        return math.nan
    return float((1 + np.sum(null >= observed - 1e-12)) / (len(null) + 1))


@dataclass
class FlipTestResult:
    """Everything :func:`flip_test` computed for one direction."""

    flipsets: Flipsets
    tests: dict[str, FlipsetTest]
    reports: dict[str, TransparencyReport]
    report_bootstrap: dict[str, dict[str, np.ndarray]]
    flip_frequency: dict[str, np.ndarray]
    stable_threshold: float
    epsilon: dict[str, float] = field(default_factory=dict)
    maps: dict[str, TransportMap] = field(default_factory=dict)
    """The observed fitted map of each stratum (str(stratum) -> map)."""
    map_files: dict[str, tuple[Path, bool]] = field(default_factory=dict)
    """With a map cache: str(stratum) -> (map file, loaded from the cache instead of fitted)."""
    bootstrap_batched: int = 0
    """Bootstrap refits done in the batched solve (the rest were refitted one by one)."""
    reverse_permutation_null: PermutationNull | None = None
    """The reverse direction's permutation-null draws from the same refits (entropic maps)."""
    permutation_null_reused: bool = False
    """Whether this direction's permutation null came from the reverse direction's refits."""

    def transparency_interval(
        self, kind: str, which: str = "mean_difference", confidence_level: float = 0.95
    ) -> list[ConfidenceInterval]:
        """Per-feature bootstrap percentile intervals of ``which`` for flipset ``kind``."""
        b = self.report_bootstrap[kind][which]
        return [_percentile(b[:, j], confidence_level) for j in range(b.shape[1])]

    def rank_stability(self, kind: str, which: str = "mean_difference") -> float:
        """Share of bootstrap replicates whose top feature (by |which|) is the observed top."""
        obs = getattr(self.reports[kind], which)
        b = self.report_bootstrap[kind][which]
        if len(b) == 0 or np.all(np.isnan(obs)):
            return math.nan
        top = int(np.nanargmax(np.abs(obs)))
        ok = ~np.all(np.isnan(b), axis=1)
        tops = np.full(len(b), -1)
        tops[ok] = np.nanargmax(np.abs(b[ok]), axis=1)
        return float(np.mean(tops == top))

    def stable_mask(self, kind: str) -> np.ndarray:
        """Source individuals flipped (``kind``) in at least ``stable_threshold`` of the refits."""
        return self.flip_frequency[kind] >= self.stable_threshold

    def summary(self) -> dict[str, Any]:
        return {
            k: {
                "count": t.count,
                "rate": t.statistic,
                "pvalue": t.pvalue,
                "excess": t.excess,
            }
            for k, t in self.tests.items()
        }


def _freeze_epsilon(fitted: dict[Any, TransportMap]) -> dict[Any, TransportMap]:
    """Estimators for refits: the observed fit's selected ε, so every refit uses one estimator."""
    out = {}
    for s, m in fitted.items():
        params = m.get_params()
        if "epsilon" in params and params["epsilon"] is None and hasattr(m, "epsilon_"):
            out[s] = clone(m).set_params(epsilon=m.epsilon_)
        else:
            out[s] = clone(m)
    return out


def flip_test(
    estimator: TransportMap | dict[Any, TransportMap],
    xs: np.ndarray,
    xt: np.ndarray,
    decide: Decide,
    source: str,
    target: str,
    *,
    strata_s: np.ndarray | None = None,
    strata_t: np.ndarray | None = None,
    scale: np.ndarray | None = None,
    features: list[str] | None = None,
    n_permutations: int = 99,
    n_selfmap: int = 49,
    n_bootstrap: int = 49,
    stable_threshold: float = 0.5,
    seed: int = 0,
    map_cache: MapCache | None = None,
    permutation_null: PermutationNull | None = None,
    rule: FlipRule = BINARY,
) -> FlipTestResult:
    """Flipsets of ``source`` → ``target`` with both nulls, bootstrap refits and flip
    frequencies (module docstring). ``xs``/``xt`` are in original units; ``scale`` (pooled SD
    per feature, default all ones) sets the units of the transparency reports.

    Permutation refits of an entropic map serve both directions: the result's
    ``reverse_permutation_null`` holds the target → source draws (each refit's inverse map,
    :meth:`EntropicMap.inverse_transform`); pass it as ``permutation_null`` to the call for
    target → source, which uses it when its own frozen ε and refit count match (else it
    refits). That halves the permutation null's cost, the largest part of FlipTest.

    ``map_cache`` (a :class:`~fairengine.transport.MapCache`) stores the observed map(s) and
    reuses them when the same estimator meets the same data again, e.g. when only the number
    of refits changed. Null and bootstrap refits are never cached (their samples differ).

    ``rule`` (:class:`~fairengine.fliptest.outcomes.FlipRule`) says what ``decide`` returns and
    what a flip is: the paper's positive decisions (default), a regression model's predictions
    compared with δ, or predicted classes; the tests, reports and frequencies are per kind of
    flipset (``rule.kinds``)."""
    rng = np.random.default_rng(seed)
    ss = np.zeros(len(xs), int) if strata_s is None else np.asarray(strata_s)
    st = np.zeros(len(xt), int) if strata_t is None else np.asarray(strata_t)
    d = xs.shape[1]
    scale = np.ones(d) if scale is None else np.asarray(scale, float)
    names = features or [f"x{j}" for j in range(d)]

    # observed
    files: dict[Any, tuple[Path, bool]] = {}
    images, _, fitted = fit_images(estimator, xs, xt, ss, st, cache=map_cache, files=files)
    kinds = rule.kinds
    dec_s = rule.outcomes(decide(xs, source))
    dec_m = rule.outcomes(decide(images, target))
    masks = dict(zip(kinds, rule.masks(dec_s, dec_m), strict=True))
    fs = Flipsets(source, target, xs, images, dec_s, dec_m, masks)
    observed = {k: m.mean() for k, m in masks.items()}
    reports = {k: transparency_report(xs, images, m, scale, names) for k, m in masks.items()}
    est = _freeze_epsilon(fitted)
    eps = {str(s): float(m.epsilon_) for s, m in fitted.items() if hasattr(m, "epsilon_")}

    # null 1: self-map (half → other half of the source, within strata)
    self_rates = selfmap_rates(
        est, xs, ss, dec_s, decide, source, draw_halves(rng, ss, n_selfmap), rule
    )

    # null 2: label permutation within strata; an entropic refit also gives the reverse
    # direction's null draw (its inverse map), handed to the caller for target -> source
    reuse = permutation_null is not None and permutation_null.usable(n_permutations, eps)
    reverse_rates = None
    if reuse:
        perm_rates = permutation_null.rates  # type: ignore[union-attr]
    else:
        labels = draw_labels(rng, ss, st, n_permutations)
        perm_rates, reverse_rates = permutation_rates(
            est, xs, xt, ss, st, decide, source, target, labels, rule
        )

    # bootstrap refits (+ per-individual flip frequency of the original source rows)
    boot_rates = np.empty((n_bootstrap, len(kinds)))
    boot_rep = {
        k: {
            "mean_difference": np.empty((n_bootstrap, d)),
            "consistency": np.empty((n_bootstrap, d)),
        }
        for k in kinds
    }
    freq = np.zeros((len(kinds), len(xs)))
    draws = [
        (
            np.concatenate(
                [rng.choice(np.flatnonzero(ss == s), np.sum(ss == s)) for s in np.unique(ss)]
            ),
            np.concatenate(
                [rng.choice(np.flatnonzero(st == s), np.sum(st == s)) for s in np.unique(st)]
            ),
        )
        for _ in range(n_bootstrap)
    ]
    refits, n_batched = _bootstrap_images(fitted, est, xs, xt, ss, st, draws)
    dec_im = _decide_stacked(decide, [im for im, _ in refits], target, rule)
    dec_q = _decide_stacked(decide, [q_im for _, q_im in refits], target, rule)
    for r, ((bs, _), (im, _)) in enumerate(zip(draws, refits, strict=True)):
        drawn = rule.masks(dec_s[bs], dec_im[r])
        boot_rates[r] = [m.mean() for m in drawn]
        disp = (im - xs[bs]) / scale
        for k, m in zip(kinds, drawn, strict=True):
            md, cons = transparency_vectors(disp, m)
            boot_rep[k]["mean_difference"][r] = md
            boot_rep[k]["consistency"][r] = cons
        freq += np.asarray(rule.masks(dec_s, dec_q[r]))
    if n_bootstrap:
        freq /= n_bootstrap

    tests = {}
    for j, k in enumerate(kinds):
        obs = float(observed[k])
        tests[k] = FlipsetTest(
            kind=k,
            statistic=obs,
            count=int(masks[k].sum()),
            n=len(xs),
            null_distribution=perm_rates[:, j],
            selfmap_distribution=self_rates[:, j],
            bootstrap_distribution=boot_rates[:, j],
            pvalue_permutation=_pvalue(perm_rates[:, j], obs),
            pvalue_selfmap=_pvalue(self_rates[:, j], obs),
        )
    return FlipTestResult(
        flipsets=fs,
        tests=tests,
        reports=reports,
        report_bootstrap=boot_rep,
        flip_frequency={k: freq[j] for j, k in enumerate(kinds)},
        stable_threshold=stable_threshold,
        epsilon=eps,
        maps={str(s): m for s, m in fitted.items()},
        map_files={str(s): f for s, f in files.items()},
        bootstrap_batched=n_batched,
        reverse_permutation_null=(
            None
            if reverse_rates is None
            else PermutationNull(rates=reverse_rates, epsilon=dict(eps))
        ),
        permutation_null_reused=reuse,
    )


def draw_halves(
    rng: np.random.Generator, ss: np.ndarray, n: int
) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """``n`` self-map splits of the source rows: per replicate and stratum, (rows of half A,
    rows of half B), each half ⌊size/2⌋ rows drawn without replacement."""
    halves = []
    for _ in range(n):
        per_stratum = []
        for s in np.unique(ss):
            idx = rng.permutation(np.flatnonzero(ss == s))
            h = len(idx) // 2
            per_stratum.append((idx[:h], idx[h : 2 * h]))
        halves.append(per_stratum)
    return halves


def selfmap_rates(
    est: dict[Any, TransportMap],
    xs: np.ndarray,
    ss: np.ndarray,
    dec_s: np.ndarray,
    decide: Decide,
    source: str,
    halves: list[list[tuple[np.ndarray, np.ndarray]]],
    rule: FlipRule = BINARY,
) -> np.ndarray:
    """Self-map null flip rates (R x kinds: F+, F− for the binary ``rule``): each replicate
    maps half A onto half B of the source (:func:`draw_halves`) with the frozen-ε estimators
    ``est`` and counts A's flips, the model seeing the source group on both sides (``dec_s``:
    its outcomes on ``xs``)."""
    rates = np.empty((len(halves), len(rule.kinds)))
    selfmaps = _selfmap_images(est, xs, ss, halves)
    mapped = _decide_stacked(decide, [im for _, im in selfmaps], source, rule)
    for r, ((ai, _), dm) in enumerate(zip(selfmaps, mapped, strict=True)):
        rates[r] = rule.rates(dec_s[ai], dm)
    return rates


def draw_labels(
    rng: np.random.Generator, ss: np.ndarray, st: np.ndarray, n: int
) -> list[np.ndarray]:
    """``n`` permutations of the group label over the pooled rows (source rows first), within
    strata: True marks a pseudo-source row."""
    pool_strata = np.concatenate([ss, st])
    is_src = np.r_[np.ones(len(ss), bool), np.zeros(len(st), bool)]
    labels = []
    for _ in range(n):
        lab = np.empty_like(is_src)
        for s in np.unique(pool_strata):
            idx = np.flatnonzero(pool_strata == s)
            lab[idx] = rng.permutation(is_src[idx])
        labels.append(lab)
    return labels


def permutation_rates(
    est: dict[Any, TransportMap],
    xs: np.ndarray,
    xt: np.ndarray,
    ss: np.ndarray,
    st: np.ndarray,
    decide: Decide,
    source: str,
    target: str,
    labels: list[np.ndarray],
    rule: FlipRule = BINARY,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Permutation null flip rates (R x 2: F+, F−) of ``source`` → ``target`` for the label
    draws ``labels`` (:func:`draw_labels`): refit pseudo-source → pseudo-target and count the
    pseudo-source's flips, the model seeing the source group on both sides. For entropic maps
    also the reverse direction's draws from the same refits (each refit's inverse map, the
    model seeing ``target``); otherwise None."""
    n = len(labels)
    rates = np.empty((n, len(rule.kinds)))
    invertible = all(_entropic(m) for m in est.values())
    reverse = np.empty((n, len(rule.kinds))) if invertible else None
    pool = np.vstack([xs, xt])
    pool_strata = np.concatenate([ss, st])
    split = _permutation_split_images(est, pool, pool_strata, labels) if invertible else None
    points: list[np.ndarray] = []  # per replicate: pseudo-source, its images (, reverse)
    for r, lab in enumerate(labels):
        ps, pt = pool[lab], pool[~lab]
        if split is not None and split[2][r]:
            im, inv = split[0][r], split[1][r]
        else:
            im, _, maps = fit_images(est, ps, pt, pool_strata[lab], pool_strata[~lab])
            inv = None
            if reverse is not None:
                inv = np.empty_like(pt)
                for s, m in maps.items():
                    rows = pool_strata[~lab] == s
                    inv[rows] = m.inverse_transform(pt[rows])
        points += [ps, im]
        if reverse is not None:
            points += [pt, inv]  # type: ignore[list-item]
    if not points:  # the model scores every replicate's points in one call per side
        return rates, reverse
    step = 4 if reverse is not None else 2
    fwd_points = [x for i, x in enumerate(points) if i % step < 2]
    rates = _flip_rates(_decide_stacked(decide, fwd_points, source, rule), rule)
    if reverse is not None:
        rev_points = [x for i, x in enumerate(points) if i % step >= 2]
        reverse = _flip_rates(_decide_stacked(decide, rev_points, target, rule), rule)
    return rates, reverse


def _flip_rates(decisions: list[np.ndarray], rule: FlipRule) -> np.ndarray:
    """Flip rates (R x kinds) from the model's outcomes on consecutive pairs (points,
    their images) of R replicates."""
    out = np.empty((len(decisions) // 2, len(rule.kinds)))
    for r in range(len(out)):
        out[r] = rule.rates(decisions[2 * r], decisions[2 * r + 1])
    return out


def _bootstrap_images(
    fitted: dict[Any, TransportMap],
    est: dict[Any, TransportMap],
    xs: np.ndarray,
    xt: np.ndarray,
    ss: np.ndarray,
    st: np.ndarray,
    draws: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
    """For each bootstrap draw (source rows, target rows): the images of the drawn source rows
    and of every original source row under the map refitted on the draw.

    An entropic map fitted on all its points refits every draw in one batched Sinkhorn per
    stratum (a resample is a reweighting of the fitted points;
    :func:`~fairengine.transport.entropic_batch.reweighted_refits`: standardization and ε in
    cost units stay the observed map's). Other maps, and draws the batch gives up on, are
    refitted one by one. Returns the images per draw and how many were batched."""
    n_draws = len(draws)
    strata = np.unique(ss)
    batched = np.zeros(n_draws, bool)
    q_all = np.empty((n_draws, *xs.shape)) if n_draws else None
    if n_draws and all(
        _reweightable(fitted[s], int(np.sum(ss == s)), int(np.sum(st == s))) for s in strata
    ):
        from fairengine.transport.entropic_batch import reweighted_refits

        batched[:] = True
        for s in strata:
            si, ti = np.flatnonzero(ss == s), np.flatnonzero(st == s)
            a = np.stack([np.bincount(bs, minlength=len(xs))[si] for bs, _ in draws], 1)
            b = np.stack([np.bincount(bt, minlength=len(xt))[ti] for _, bt in draws], 1)
            images, ok = reweighted_refits(fitted[s], a / len(si), b / len(ti), xs[si])
            q_all[:, si] = images  # type: ignore[index]
            batched &= ok
    out = []
    for r, (bs, bt) in enumerate(draws):
        if batched[r]:
            q_im = q_all[r]  # type: ignore[index]
            out.append((q_im[bs], q_im))  # a drawn row's image is its original's image
        else:
            im, q_im, _ = fit_images(est, xs[bs], xt[bt], ss[bs], st[bt], xs, ss)
            out.append((im, q_im))
    return out, int(batched.sum())


def _decide_stacked(
    decide: Decide, points: list[np.ndarray], group: str, rule: FlipRule = BINARY
) -> list[np.ndarray]:
    """The model's outcomes (``rule.outcomes``) for each array in ``points``, from few calls
    on stacked arrays (up to :data:`DECIDE_ROWS` rows each) instead of one call per replicate."""
    out: list[np.ndarray] = []
    start = 0
    while start < len(points):
        stop, rows = start, 0
        while stop < len(points) and (stop == start or rows + len(points[stop]) <= DECIDE_ROWS):
            rows += len(points[stop])
            stop += 1
        flat = rule.outcomes(decide(np.concatenate(points[start:stop]), group))
        out += np.split(flat, np.cumsum([len(x) for x in points[start:stop]])[:-1])
        start = stop
    return out


def _selfmap_images(
    est: dict[Any, TransportMap],
    xs: np.ndarray,
    ss: np.ndarray,
    halves: list[list[tuple[np.ndarray, np.ndarray]]],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each self-map replicate (per stratum: rows of half A, rows of half B): the rows of
    A (all strata) and their images under the map refitted A → B.

    Entropic maps at a fixed ε run all replicates of a stratum through one batched stabilized
    Sinkhorn (:func:`~fairengine.transport.entropic_batch.split_refits`, about 2x faster on
    halves of 250 points, where the loop costs more than the products); the standardization
    is the stratum's, as every half-to-half refit's own pooled sample is. Other maps, and
    replicates the batch does not converge, are refitted one by one."""
    strata = list(np.unique(ss))
    n_rep = len(halves)
    out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * n_rep
    batched: list[list[np.ndarray]] = [[] for _ in range(n_rep)]
    ok = np.zeros(n_rep, bool)
    fixed = [est[s] for s in strata]
    if n_rep and all(_entropic(m) and m.epsilon is not None for m in fixed):
        from fairengine.transport.entropic_batch import split_refits

        ok[:] = True
        for j, s in enumerate(strata):
            rows = np.flatnonzero(ss == s)
            local = np.full(len(xs), -1)
            local[rows] = np.arange(len(rows))
            a = np.stack([local[h[j][0]] for h in halves])
            b = np.stack([local[h[j][1]] for h in halves])
            if a.shape[1] < 2 or b.shape[1] < 2:
                ok[:] = False
                break
            images, _, good = split_refits(fixed[j], xs[rows], a, b)
            ok &= good
            for r in range(n_rep):
                batched[r].append(images[r])
    for r, per_stratum in enumerate(halves):
        ai = np.concatenate([h[0] for h in per_stratum])
        if ok[r]:
            out[r] = (ai, np.concatenate(batched[r]))
        else:
            bi = np.concatenate([h[1] for h in per_stratum])
            im, _, _ = fit_images(est, xs[ai], xs[bi], ss[ai], ss[bi])
            out[r] = (ai, im)
    return out  # type: ignore[return-value]


def _permutation_split_images(
    est: dict[Any, TransportMap],
    pool: np.ndarray,
    pool_strata: np.ndarray,
    labels: list[np.ndarray],
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray] | None:
    """The permutation null's refits as split problems of the pooled rows: per stratum, every
    replicate maps its pseudo-source rows onto its pseudo-target rows
    (:func:`~fairengine.transport.entropic_batch.split_refits`: the pooled standardization,
    which is each refit's own, and ε in cost units from the first replicate's split; one by one
    on the CPU, batched on a GPU), with the inverse images for the reverse direction. Saves
    each refit's own median cost and out-of-distribution guard.

    Returns per replicate the images of ``pool[lab]`` and of ``pool[~lab]`` under the inverse
    map (rows in pool order, as :func:`fit_images` gives them) and a mask of replicates that
    converged (the others are refitted one by one), or None when the maps are not entropic at a
    fixed ε or a stratum has too few rows on a side."""
    n_rep = len(labels)
    if not n_rep:
        return None
    strata = list(np.unique(pool_strata))
    if not all(_entropic(est.get(s)) and est[s].epsilon is not None for s in strata):
        return None
    from fairengine.transport.entropic_batch import split_refits

    images = [np.empty((int(lab.sum()), pool.shape[1])) for lab in labels]
    inverse = [np.empty((int((~lab).sum()), pool.shape[1])) for lab in labels]
    ok = np.ones(n_rep, bool)
    for s in strata:
        rows = np.flatnonzero(pool_strata == s)
        src = np.stack([np.flatnonzero(lab[rows]) for lab in labels])
        tgt = np.stack([np.flatnonzero(~lab[rows]) for lab in labels])
        if src.shape[1] < 2 or tgt.shape[1] < 2:
            return None
        fwd, inv, good = split_refits(est[s], pool[rows], src, tgt, inverse=True)
        ok &= good
        for r, lab in enumerate(labels):
            # positions of this stratum's rows among the replicate's pseudo-source / -target
            images[r][(pool_strata[lab] == s)] = fwd[r]
            inverse[r][(pool_strata[~lab] == s)] = inv[r]  # type: ignore[index]
    return images, inverse, ok


def _reweightable(m: TransportMap, n_source: int, n_target: int) -> bool:
    """A fitted entropic map whose anchors and support are all of its fit sample, in order, and
    small enough for the batched solve's float64 matrices (:data:`BATCH_MAX_ENTRIES`)."""
    return (
        _entropic(m)
        and len(m.anchors_) == n_source
        and len(m.support_) == n_target
        and n_source * n_target <= BATCH_MAX_ENTRIES
    )
