r"""Paired comparison of two models' fairness gaps: is the candidate less fair than the baseline?

Both models are scored on the same rows. For every protected attribute, every pair of its
groups (a, b) (a before b in category order, as the audit's two-group gap questions,
:func:`fairengine.results.gap_question`) and every metric r ∈ {selection rate, TPR, FPR}, the
signed gap of model m is g_m = r_{m,a} − r_{m,b} and the quantity compared is

    Δ = |g_cand| − |g_base|     (positive: the candidate is more unequal).

**Why not bootstrap Δ̂ directly.** |·| is not differentiable at 0, so Δ̂ = |ĝ_c| − |ĝ_b| is
biased where a true gap is 0 (E|ĝ_b| ≈ 0.8·se when g_b = 0), and a percentile bootstrap of Δ̂
inherits the bias: it makes the candidate look fairer and inflates the type-I error of the
non-inferiority test exactly in the common case of a fair baseline (the bootstrap is
inconsistent for non-smooth functionals; Efron & Tibshirani 1993, *An Introduction to the
Bootstrap*, §7.4 and ch. 14 on smooth functions). Instead, each question uses four **smooth
contrasts**

    c_{σ,s} = σ·g_cand − s·g_base,     σ, s ∈ {−1, +1},

differences of signed gaps, whose bootstrap is consistent and whose variance is small when the
models agree on most rows (what pairing buys). For every s and σ,

    Δ ≤ |g_c| − s·g_b = max_σ c_{σ,s},         Δ ≥ σ·g_c − |g_b| = min_s c_{σ,s}.

**Simultaneous bounds (single-step maxT).** Let K = 4Q contrasts over the Q tested questions
(the family: all attributes, pairs and metrics). Resample rows jointly (label, groups and both
models' predictions of a row together) B times; as all metrics are rates, a resample is exactly a
multinomial draw of the count table over the cells (joint group × y × ŷ_base × ŷ_cand)
(:mod:`fairengine.comparison._cells`). With se_k the bootstrap SD of contrast k,

    T*_b = max_k |c*_{b,k} − ĉ_k| / se_k,   q = T*_(⌈(1−α)(B+1)⌉),   ĉ_k ± q·se_k,

the studentized (by the bootstrap SD) max-|t| band of Romano & Wolf (2005, "Exact and
approximate stepdown methods for multiple hypothesis testing", JASA 100:94-108; its first,
single step) — simultaneous asymptotic (1 − α) coverage of all K contrasts. Contrasts that do
not move under resampling (se_k = 0, e.g. c_{+,+} of two identical models) are known exactly:
their band is ĉ_k and they are left out of T*.

**Bounds on Δ.** On the coverage event every contrast is inside its band, so every identity
above turns into a bound, whichever sign the data chose. Per question, with ŝ = sign(ĝ_base)
and σ̂ = sign(ĝ_cand) (+1 at 0), and the triangle inequality |Δ| ≤ |g_c − g_b| = max(c_{+,+},
c_{−,−}) as a second construction,

    U = min( max_σ UB(c_{σ,ŝ}),  max(UB(c_{+,+}), UB(c_{−,−})) ),
    L = max( min_s LB(c_{σ̂,s}),  min(LB(c_{+,+}), LB(c_{−,−})) ),

with UB = ĉ + q·se and LB = ĉ − q·se; [L, U] covers Δ for all questions at once with
probability → 1 − α. *Why the second term* (issue 20 specified the first term only): with
the first term alone, two identical models with a gap near 0 get U ≈ −2ĝ + 2q·se_g > 0 — a
wide interval although Δ ≡ 0 — because c_{−,ŝ} = −g_c − ŝ·g_b carries the full variance of the
gaps; the triangle term is exactly 0 then (c_{+,+} ≡ 0) and, for models that agree on most rows,
about ±q·se(g_c − g_b), which is what pairing buys. Taking the tighter of two valid bounds keeps
the coverage (both hold on the same event). Taking the minimum over s (and maximum over σ) of
the first terms would also be valid; the specified ŝ, σ̂ are kept, as they are the better
choice whenever the sign of the gap is clear.

**Decisions** (family-wise error ≤ α over all questions, asymptotically):

* ``not_worse`` — non-inferiority (Wellek 2010, *Testing Statistical Hypotheses of Equivalence
  and Noninferiority*, 2nd ed., ch. 2: reject H0: Δ ≥ δ when the upper confidence bound is below
  the margin): U < δ. "The candidate is not worse than the baseline by more than δ."
* ``worse`` — L > 0: the candidate is more unequal than the baseline.

Both can hold (more unequal, but within the margin); the question's ``decision`` is
``not_worse`` when U < δ, else ``worse`` when L > 0, else ``undetermined``. p-values: U < δ iff
q < t_NI = max over the two constructions of min over their contrasts of (δ − ĉ_k)/se_k, so
the smallest α at which U < δ is the maxT-adjusted p-value
p_NI = (1 + #{b : T*_b ≥ t_NI})/(B + 1); likewise p_W for H0: Δ ≤ 0 with t_W = max over the
constructions of min over their contrasts of ĉ_k/se_k. p ≤ α iff the bound crosses its
threshold (with q the order statistic above), so p-values and bounds never disagree.

**Monte-Carlo resolution.** q and se_k are estimated from B resamples. The decision "q < t"
is *settled* when it holds for the whole Monte-Carlo range: q_hi < t_lo (reject) or q_lo ≥ t_hi
(not), where [q_lo, q_hi] = [T*_(l), T*_(u)] is the distribution-free binomial order-statistic
interval for the ideal (1 − α) quantile ξ of T* (P(T*_(l) > ξ) = P(Bin(B, 1−α) < l) ≤ e/4,
likewise above), and [t_lo, t_hi] is t recomputed with se_k·(1 ± r_k),
r_k = z_{1−e/(4K)}·√((κ_k − 1)/(4B)) (the large-B SD of a sample SD, κ_k the kurtosis of
contrast k; a normal approximation). e = ε/J per look for J looks (Bonferroni over the fixed
schedule, ε = ``risk``). While a decision is not settled, B grows (B = 1999, then batches ×2,
as :class:`fairengine.decisions.ResamplingSettings`) up to ``max_resamples`` (lowered so the
B × K draws fit :data:`~fairengine.comparison.settings.MAX_DRAW_ENTRIES`). A decision still
open at the cap is reported as ``undetermined (Monte-Carlo resolution)`` with the number of
resamples, never as "no evidence"; the flag (``not_worse``/``worse``) is then ``None``. The
p-values stay the plain ones above. The guarantee is approximate: it treats t as fixed given
se_k's range, and ignores that the quantile and the SDs come from the same resamples.

**Undefined rates.** A group with no positives (TPR) or no negatives (FPR) in the data, or no
rows at all, leaves that question **not tested** (with the reason) and out of the family. A
resample in which a tested rate has a zero denominator gives no value of T*; such resamples are
left out (the bootstrap conditional on every tested rate being defined, the usual convention,
Efron & Tibshirani §6), counted in ``diagnostics.n_undefined`` and warned about above 1 % of the
draws, where the intervals of the small groups involved are unreliable. Sample weights are not
accepted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from fairengine.comparison import _bounds, _cells
from fairengine.comparison._cells import Question
from fairengine.comparison.result import (
    ComparisonDiagnostics,
    ComparisonQuestion,
    ComparisonResult,
    Decision,
    MetricName,
)
from fairengine.comparison.settings import (
    MAX_DRAW_ENTRIES,
    ComparisonInputError,
    ComparisonResampling,
)
from fairengine.dataset import GroupEncoding
from fairengine.results import gap_question

METRICS: tuple[MetricName, ...] = ("selection_rate", "tpr", "fpr")
#: The audit's canonical rate names (:func:`fairengine.results.gap_question`).
CANONICAL = {"selection_rate": "positive_rate", "tpr": "tpr", "fpr": "fpr"}
_DENOMINATOR = {"selection_rate": "rows", "tpr": "positives (y = 1)", "fpr": "negatives (y = 0)"}
#: Share of draws with an undefined tested rate above which a warning is given.
UNDEFINED_WARNING = 0.01

GroupsInput = Mapping[str, GroupEncoding | tuple[Any, Sequence[str]]]


def compare_models(
    label: Any,
    baseline: Any,
    candidate: Any,
    groups: GroupsInput,
    *,
    threshold: float | None = None,
    metrics: Sequence[str] = METRICS,
    alpha: float = 0.05,
    delta: float = 0.02,
    seed: int | None = 0,
    resampling: ComparisonResampling | None = None,
) -> ComparisonResult:
    """Compare the fairness gaps of ``candidate`` against ``baseline`` on the same rows.

    ``label``: 0/1 outcomes (n,). ``baseline``, ``candidate``: 0/1 predictions (n,), or
    probabilities in [0, 1] with ``threshold`` (ŷ = 1{p > threshold}, the audit's rule).
    ``groups``: protected attributes by name, each a
    :class:`~fairengine.dataset.GroupEncoding` (``AuditDataset.groups``) or a pair
    (integer codes 0..G−1, group names). ``metrics``: a subset of ``selection_rate``, ``tpr``,
    ``fpr``. ``alpha``: family-wise level; ``delta``: non-inferiority margin in absolute rate
    units (≥ 0). ``seed``: of the paired bootstrap. See the module docstring for the method.
    """
    y = _binary("label", label)
    n = y.size
    base = _predictions("baseline", baseline, n, threshold)
    cand = _predictions("candidate", candidate, n, threshold)
    attrs = _groups(groups, n)
    chosen = _metrics(metrics)
    alpha = _unit("alpha", alpha)
    delta = _margin(delta)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
        raise ComparisonInputError(f"seed must be an integer or None, got {seed!r}")
    settings = ComparisonResampling() if resampling is None else resampling
    if not isinstance(settings, ComparisonResampling):
        raise ComparisonInputError(
            f"resampling must be a ComparisonResampling, got {type(settings).__name__}"
        )

    table = _cells.CellTable.from_rows(
        y, base, cand, [codes for _, codes, _ in attrs], [len(c) for _, _, c in attrs]
    )
    questions = [
        Question(k, name, a, b, metric)
        for k, (name, _, cats) in enumerate(attrs)
        for a in range(len(cats))
        for b in range(a + 1, len(cats))
        for metric in chosen
    ]
    observed = table.counts[None, :]
    g_base, g_cand = (g[0] for g in _cells.gaps(table, observed, questions))
    dens = {
        (k, m): _cells.rates(table.group_counts(observed, k), m)[2][0]
        for k in range(len(attrs))
        for m in chosen
    }
    reasons: list[str | None] = []
    for q in questions:
        den = dens[(q.k, q.metric)]
        cats = attrs[q.k][2]
        empty = [cats[g] for g in (q.a, q.b) if den[g] == 0]
        reasons.append(
            None
            if not empty
            else f"group(s) {', '.join(map(repr, empty))} of {q.attribute!r} have no "
            f"{_DENOMINATOR[q.metric]}, so the {q.metric} is undefined"
        )
    tested = [i for i, r in enumerate(reasons) if r is None]
    tested_q = [questions[i] for i in tested]
    warnings: list[str] = []
    sides: dict[int, tuple[_bounds.Side, _bounds.Side]] = {}
    bd: _bounds.Band | None = None
    looks: list[int] = []
    n_drawn = n_undefined = 0
    if tested:
        obs_c = _cells.contrasts(g_base[None, tested], g_cand[None, tested])[0]
        k_cols = obs_c.size
        schedule = settings.schedule(cap=MAX_DRAW_ENTRIES // k_cols)
        if schedule[-1] < settings.max_resamples:
            warnings.append(
                f"max_resamples lowered to {schedule[-1]} so that the {k_cols} contrasts' "
                f"draws fit in memory"
            )
        rng = np.random.default_rng(seed)
        kept = np.empty((0, k_cols))
        per_look = settings.risk / len(schedule)
        for total in schedule:
            new = _cells.contrast_draws(table, tested_q, rng, total - n_drawn)
            n_drawn = total
            looks.append(total)
            ok = np.isfinite(new).all(axis=1)
            n_undefined += int((~ok).sum())
            kept = np.concatenate([kept, new[ok]])
            if kept.shape[0] < 99:
                continue
            bd = _bounds.band(kept, obs_c, alpha, per_look)
            sides = {
                i: _question_sides(bd, j, g_base[i], g_cand[i], delta) for j, i in enumerate(tested)
            }
            if all(s.settled is not None for pair in sides.values() for s in pair):
                break
        if bd is None:
            for i in tested:
                reasons[i] = "the tested rates are undefined in almost every resample"
            warnings.append(
                f"only {kept.shape[0]} of {n_drawn} resamples had every tested rate defined; "
                "nothing was tested (groups too small)"
            )
        elif n_undefined > UNDEFINED_WARNING * n_drawn:
            warnings.append(
                f"{n_undefined} of {n_drawn} resamples had a tested rate with a zero "
                "denominator and were left out (conditional bootstrap); intervals of the "
                "smallest groups' TPR/FPR are unreliable"
            )
    out: list[ComparisonQuestion] = []
    n_used = 0 if bd is None else bd.n
    for i, q in enumerate(questions):
        out.append(
            _question(q, attrs, dens, g_base[i], g_cand[i], sides.get(i), reasons[i], delta, n_used)
        )
    open_mc = sum(1 for x in out if x.decision == "undetermined (Monte-Carlo resolution)")
    if open_mc:
        warnings.append(
            f"{open_mc} question(s) undetermined at Monte-Carlo resolution after {n_used} "
            "resamples (raise resampling.max_resamples to settle them)"
        )
    untested = sum(1 for x in out if x.decision == "not_tested")
    if untested:
        warnings.append(f"{untested} question(s) not tested (undefined rates)")
    nan = math.nan
    return ComparisonResult(
        questions=tuple(out),
        alpha=alpha,
        delta=delta,
        n_rows=n,
        n_resamples=n_used,
        confidence_method=(
            f"paired row bootstrap (multinomial over joint-group × y × ŷ_base × ŷ_cand cells), "
            f"single-step maxT band over {4 * len(tested)} smooth contrasts σ·g_cand − s·g_base "
            f"(studentized by the bootstrap SD; Romano & Wolf 2005), simultaneous "
            f"{1 - alpha:.0%} bounds on |g_cand| − |g_base|; non-inferiority margin δ = {delta:g}"
        ),
        warnings=tuple(warnings),
        diagnostics=ComparisonDiagnostics(
            n_resamples=n_used,
            n_drawn=n_drawn,
            n_undefined=n_undefined,
            looks=tuple(looks),
            quantile=nan if bd is None else bd.q,
            quantile_low=nan if bd is None else bd.q_low,
            quantile_high=nan if bd is None else bd.q_high,
            resampling=settings,
            seed=None if seed is None else int(seed),
        ),
    )


# ----------------------------------------------------------------------------- per question


def _question_sides(
    bd: _bounds.Band, j: int, gb: float, gc: float, delta: float
) -> tuple[_bounds.Side, _bounds.Side]:
    """(non-inferiority side U, worse side L) of tested question j (columns 4j..4j+3)."""
    s_hat = 1 if gb >= 0 else -1
    sigma_hat = 1 if gc >= 0 else -1
    col = {sig: 4 * j + i for i, sig in enumerate(_cells.SIGNS)}
    diagonal = [col[(1, 1)], col[(-1, -1)]]  # ±(g_c − g_b): the triangle inequality
    up = _bounds.upper(bd, [[col[(1, s_hat)], col[(-1, s_hat)]], diagonal], delta)
    low = _bounds.lower(bd, [[col[(sigma_hat, 1)], col[(sigma_hat, -1)]], diagonal])
    return up, low


def _question(
    q: Question,
    attrs: list[tuple[str, np.ndarray, tuple[str, ...]]],
    dens: dict[tuple[int, str], np.ndarray],
    gb: float,
    gc: float,
    sides: tuple[_bounds.Side, _bounds.Side] | None,
    reason: str | None,
    delta: float,
    n_used: int,
) -> ComparisonQuestion:
    cats = attrs[q.k][2]
    den = dens[(q.k, q.metric)]
    nan = math.nan
    if sides is None:
        low = high = p_ni = p_w = nan
        not_worse = worse = None
        decision: Decision = "not_tested"
        reading = f"not tested: {reason}"
    else:
        up, lo = sides
        low, high, p_ni, p_w = lo.bound, up.bound, up.pvalue, lo.pvalue
        not_worse, worse = up.settled, lo.settled
        decision, reading = _reading(not_worse, worse, low, high, delta, n_used)
    return ComparisonQuestion(
        question=gap_question(CANONICAL[q.metric], q.attribute, cats[q.a], cats[q.b]),
        metric=cast(MetricName, q.metric),
        attribute=q.attribute,
        group_a=cats[q.a],
        group_b=cats[q.b],
        n_a=int(den[q.a]),
        n_b=int(den[q.b]),
        gap_baseline=float(gb),
        gap_candidate=float(gc),
        difference=float(abs(gc) - abs(gb)) if math.isfinite(gb + gc) else nan,
        low=float(low),
        high=float(high),
        pvalue_not_worse=float(p_ni),
        pvalue_worse=float(p_w),
        not_worse=not_worse,
        worse=worse,
        decision=decision,
        reading=reading,
        reason=reason,
    )


def _reading(
    not_worse: bool | None,
    worse: bool | None,
    low: float,
    high: float,
    delta: float,
    n_used: int,
) -> tuple[Decision, str]:
    interval = f"Δ = |g_cand| − |g_base| in [{low:.4f}, {high:.4f}]"
    mc = f"within Monte-Carlo error of its threshold after {n_used} resamples"
    if not_worse:
        if worse:
            return "not_worse", (
                f"candidate more unequal than baseline, but by less than the margin "
                f"δ = {delta:g} ({interval})"
            )
        extra = "; whether it is more unequal at all is " + mc if worse is None else ""
        return "not_worse", (
            f"candidate not worse than baseline by more than δ = {delta:g} ({interval}){extra}"
        )
    if not_worse is None:
        return "undetermined (Monte-Carlo resolution)", (
            f"non-inferiority bound U = {high:.4f} is {mc} (δ = {delta:g}); "
            f"{'candidate more unequal than baseline; ' if worse else ''}"
            "more resamples would settle it"
        )
    if worse:
        beyond = " by more than the margin" if low > delta else ", possibly beyond the margin"
        return "worse", f"candidate more unequal than baseline{beyond} δ = {delta:g} ({interval})"
    if worse is None:
        return "undetermined (Monte-Carlo resolution)", (
            f"not shown within δ = {delta:g}; whether the candidate is more unequal is {mc} "
            f"({interval})"
        )
    return "undetermined", (
        f"neither within the margin δ = {delta:g} nor shown more unequal ({interval})"
    )


# ----------------------------------------------------------------------------- input checks


def _array(name: str, value: Any) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ComparisonInputError(f"{name} must be a 1-D array ({exc})") from None
    if arr.ndim != 1:
        raise ComparisonInputError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ComparisonInputError(f"{name} is empty; a comparison needs rows")
    return arr


def _zero_one(name: str, arr: np.ndarray) -> np.ndarray | None:
    if arr.dtype == bool:
        return arr.astype(np.int8)
    if not np.issubdtype(arr.dtype, np.number):
        return None
    values = arr.astype(np.float64)
    if not np.all((values == 0) | (values == 1)):
        return None
    return values.astype(np.int8)


def _binary(name: str, value: Any) -> np.ndarray:
    arr = _array(name, value)
    out = _zero_one(name, arr)
    if out is None:
        seen = np.unique(arr)[:5].tolist() if arr.dtype != object else arr[:5].tolist()
        raise ComparisonInputError(f"{name} must hold 0/1 values only, found {seen}")
    return out


def _predictions(name: str, value: Any, n: int, threshold: float | None) -> np.ndarray:
    arr = _array(name, value)
    if arr.size != n:
        raise ComparisonInputError(
            f"{name} has {arr.size} rows but label has {n}; both models must be scored on "
            "the same rows"
        )
    if threshold is None:
        out = _zero_one(name, arr)
        if out is None:
            raise ComparisonInputError(
                f"{name} must hold 0/1 predictions (pass threshold= to threshold probabilities)"
            )
        return out
    t = threshold
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 <= float(t) <= 1.0:
        raise ComparisonInputError(f"threshold must be a number in [0, 1], got {t!r}")
    if not np.issubdtype(arr.dtype, np.number) or arr.dtype == bool:
        raise ComparisonInputError(f"{name} must hold probabilities in [0, 1] with threshold")
    p = arr.astype(np.float64)
    if not np.all(np.isfinite(p)) or p.min() < 0.0 or p.max() > 1.0:
        raise ComparisonInputError(f"{name} must hold probabilities in [0, 1] with threshold")
    return (p > float(t)).astype(np.int8)


def _groups(groups: GroupsInput, n: int) -> list[tuple[str, np.ndarray, tuple[str, ...]]]:
    if not isinstance(groups, Mapping) or not groups:
        raise ComparisonInputError(
            "groups must be a non-empty mapping {attribute: GroupEncoding or (codes, names)}"
        )
    out = []
    for name, enc in groups.items():
        where = f"groups[{name!r}]"
        if isinstance(enc, GroupEncoding):
            codes, cats = enc.codes, tuple(str(c) for c in enc.categories)
        elif isinstance(enc, tuple) and len(enc) == 2:
            codes, cats = enc[0], tuple(str(c) for c in enc[1])
        else:
            raise ComparisonInputError(
                f"{where} must be a GroupEncoding or a pair (codes, group names)"
            )
        arr = _array(where, codes)
        if arr.size != n:
            raise ComparisonInputError(f"{where} has {arr.size} rows but label has {n}")
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
            raise ComparisonInputError(f"{where} codes must be integers 0..G-1")
        if len(set(cats)) != len(cats):
            raise ComparisonInputError(f"{where} group names must be distinct, got {cats}")
        if arr.min() < 0 or arr.max() >= len(cats):
            raise ComparisonInputError(
                f"{where} codes must lie in 0..{len(cats) - 1} (one per group name)"
            )
        present = np.unique(arr).size
        if present < 2:
            raise ComparisonInputError(
                f"{where} has {present} group with rows; a comparison of gaps needs at least "
                "two groups"
            )
        out.append((str(name), arr.astype(np.int64), cats))
    return out


def _metrics(metrics: Sequence[str]) -> list[str]:
    if isinstance(metrics, str):
        metrics = [metrics]
    chosen = list(metrics)
    bad = [m for m in chosen if m not in METRICS]
    if not chosen or bad or len(set(chosen)) != len(chosen):
        raise ComparisonInputError(
            f"metrics must be distinct names from {list(METRICS)}, got {list(metrics)!r}"
        )
    return chosen


def _unit(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ComparisonInputError(f"{name} must lie in (0, 1), got {value!r}")
    return float(value)


def _margin(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ComparisonInputError(f"delta must be a finite number >= 0, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ComparisonInputError(
            f"delta must be >= 0 and <= 1 (a margin in absolute rate units), got {value!r}"
        )
    return float(value)
