"""More null refits for FlipTest's flipset tests, drawn by the audit's sequential decisions.

A flipset test's p-value is the larger of two Monte-Carlo p-values
(:mod:`fairengine.fliptest.statistics`): S of R self-map refits and S of R permutation
refits with a flip rate at least the observed one. :func:`~fairengine.decisions.decide_family`
asks for more refits of a part where the test's decision at its multiplicity-adjusted level is
still open (Gandy & Hahn's MMCTest), so a flipset far beyond both nulls is certified with the
refits it needs, not the few that :func:`run_fliptest` drew for every direction.

:class:`FlipTestResampler` rebuilds what each draw needs from the method's own inputs (the
dataset, the configuration, the model and the seed: :func:`plan_pairs` and
:func:`pair_sample` give the same pairs and rows as the run) and the ε the run froze for each
direction. Each (pair, direction, null, start) batch draws from its own
``SeedSequence(pair seed, spawn_key=(stream, direction, start))`` (independent of the run's
stream and of each other, reproducible in any order or thread). One batch of refits gives the
rates of both flipsets (F+, F−) of a direction, and, where the run shared the permutation null
between the two directions (entropic maps at equal ε: each refit's inverse map), the reverse
direction's draws too; a batch is drawn once and cached for every test it serves.

The work is bounded per part by ``methods.fliptest.max_null_refits``: a test whose decision
would need more stays *undetermined (Monte-Carlo resolution)* with the refits that would
settle it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import clone

from fairengine import progress, worker_processes
from fairengine.dataset import AuditDataset
from fairengine.finding_keys import pair_token, part_token
from fairengine.fliptest.config import FlipTestConfig
from fairengine.fliptest.flipsets import Decide
from fairengine.fliptest.method import (
    METHOD,
    PREFIXES,
    PredictProba,
    decision_threshold,
    flip_rule,
    make_estimator,
    map_device,
    model_decider,
    pair_sample,
    plan_pairs,
)
from fairengine.fliptest.outcomes import BINARY, FlipRule
from fairengine.fliptest.result import FlipTestDetails
from fairengine.fliptest.statistics import (
    draw_halves,
    draw_labels,
    permutation_rates,
    selfmap_rates,
)
from fairengine.library_threads import small_problem_threads
from fairengine.results import MethodResult
from fairengine.transport._base import TransportMap, as_points

SELFMAP_STREAM = 1
PERMUTATION_STREAM = 2
REFIT_CHUNK = 100
"""Refits solved and scored together (bounds the memory of a large batch)."""
WORKER_SHARES = 4
"""A batch of refits goes to the worker processes in up to this many pieces (whole chunks)."""


@dataclass(frozen=True)
class _Direction:
    """One direction of one pair: where its rows are and the ε its run froze."""

    pair: int
    index: int  # 0: a -> b, 1: b -> a
    source: str
    target: str
    epsilon: dict[str, float] | None
    shared_permutation: bool
    """Its permutation null comes from the same refits as the other direction's."""


@dataclass
class _PairState:
    xa: np.ndarray
    xb: np.ndarray
    sa: np.ndarray
    sb: np.ndarray
    decide: Decide
    seed: int


class FlipTestResampler:
    """Draws more self-map and permutation refits for the flipset tests of one FlipTest run
    (a :class:`fairengine.decisions.Resampler`; module docstring).

    ``result`` is the run's :class:`~fairengine.results.MethodResult`; ``dataset``, ``config``,
    ``predict_proba`` and ``seed`` must be what the run was given."""

    def __init__(
        self,
        dataset: AuditDataset,
        config: FlipTestConfig,
        result: MethodResult,
        *,
        predict_proba: PredictProba | None,
        seed: int = 0,
    ) -> None:
        self.dataset = dataset
        self.config = config
        self.predict_proba = predict_proba
        self.seed = int(seed)
        self._observed = {f.key: float(f.estimate) for f in result.findings if f.resampling}
        self._tests: dict[str, tuple[_Direction, int]] = {}
        self._jobs: list[Any] = []
        self._states: dict[int, _PairState] = {}
        self._epsilon: dict[tuple[int, int], dict[str, float] | None] = {}
        self._points: np.ndarray | None = None
        self._names: list[str] = []
        self._cache: dict[tuple[Any, ...], np.ndarray] = {}
        self._locks: dict[tuple[Any, ...], threading.Lock] = {}
        self._lock = threading.Lock()
        self.rule: FlipRule = BINARY
        usable = (
            result.method == METHOD
            and result.status == "ok"
            and config.enabled
            and predict_proba is not None
            and config.max_null_refits > 0
        )
        if usable:
            self.rule = flip_rule(dataset, config)
            self._index(result)

    def _index(self, result: MethodResult) -> None:
        details = result.details
        if not isinstance(details, FlipTestDetails):
            return  # not a FlipTest run of this version: draw nothing
        jobs, _ = plan_pairs(self.dataset, self.config, self.seed)
        pairs = details.pairs
        if len(pairs) != len(jobs):
            return  # not this configuration's run: draw nothing
        self._jobs = jobs
        for p, (job, detail) in enumerate(zip(jobs, pairs, strict=True)):
            cats = self.dataset.groups[job.attr].categories
            names = (cats[job.ga], cats[job.gb])
            if detail.groups != names:
                self._jobs = []
                self._tests.clear()
                return
            shared = detail.directions[1].permutation_null_from_reverse_refits
            for d, direction in enumerate(detail.directions):
                src, tgt = names[d], names[1 - d]
                info = _Direction(p, d, src, tgt, direction.epsilon, shared)
                self._epsilon[(p, d)] = info.epsilon
                for k, kind in enumerate(self.rule.kinds):
                    key = f"{PREFIXES[kind]}.{part_token(job.attr)}.{pair_token(src, tgt)}"
                    if key in self._observed:
                        self._tests[key] = (info, k)

    # -- the Resampler protocol -------------------------------------------------------------

    def can_extend(self, key: str) -> bool:
        return key in self._tests

    def max_resamples(self, key: str) -> int | None:
        """The most refits of each null a flipset test may reach."""
        return int(self.config.max_null_refits) if key in self._tests else None

    def cap_setting(self, key: str) -> str:
        return "methods.fliptest.max_null_refits"

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        info, k = self._tests[key]
        if part == "self-map":
            rates = self._batch(("self-map", info.pair, info.index, start, batch), info)
        elif part == "permutation":
            rates = self._permutation(info, start, batch)
        else:
            raise ValueError(f"{key}: FlipTest has no null part {part!r}")
        return int(np.sum(rates[:, k] >= self._observed[key] - 1e-12))

    # -- drawing ------------------------------------------------------------------------------

    def _permutation(self, info: _Direction, start: int, batch: int) -> np.ndarray:
        if info.shared_permutation:
            both = self._batch(("permutation", info.pair, -1, start, batch), info)
            k = len(self.rule.kinds)
            return both[:, k * info.index : k * info.index + k]
        return self._batch(("permutation", info.pair, info.index, start, batch), info)

    def _batch(self, key: tuple[Any, ...], info: _Direction) -> np.ndarray:
        """The rates of one batch (cached; drawn once even when tests ask from threads)."""
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
            rates = self._draw(key, info)
            with self._lock:
                self._cache[key] = rates
                self._locks.pop(key, None)
            return rates

    def _draw(self, key: tuple[Any, ...], info: _Direction) -> np.ndarray:
        part, pair, direction, start, batch = key
        state = self._state(pair)
        # the permutation null shared by both directions is drawn as a -> b (direction 0)
        d = 0 if direction < 0 else direction
        xs, xt = (state.xa, state.xb) if d == 0 else (state.xb, state.xa)
        ss, st = (state.sa, state.sb) if d == 0 else (state.sb, state.sa)
        source, target = (
            (info.source, info.target) if info.index == d else (info.target, info.source)
        )
        stream = SELFMAP_STREAM if part == "self-map" else PERMUTATION_STREAM
        ss_seq = np.random.SeedSequence(
            state.seed, spawn_key=(stream, max(direction, 0), int(start))
        )
        rng = np.random.default_rng(ss_seq)
        est = self._estimators(self._epsilon.get((pair, d)), ss)
        job = self._jobs[pair]
        progress.report(
            METHOD,
            f"more {part} refits for {job.attr} {source} -> {target}: "
            f"{start:,} -> {start + batch:,}",
        )
        draws = (
            draw_halves(rng, ss, batch) if part == "self-map" else draw_labels(rng, ss, st, batch)
        )
        # the refits hold the GIL (small problems): worker processes compute them when
        # available (fairengine.worker_processes), else this thread; the same rates either way.
        # A large batch is split at REFIT_CHUNK boundaries (refit_rates' own chunks) so that
        # every worker takes a share.
        share = REFIT_CHUNK * max(1, -(-len(draws) // (REFIT_CHUNK * max(1, WORKER_SHARES))))
        pieces = [draws[i : i + share] for i in range(0, len(draws), share)]
        args = [(part, est, xs, xt, ss, st, state.decide, source, target, p) for p in pieces]
        if self.device.startswith("cuda"):  # GPU kernels do not hold the GIL: this thread
            rates = [refit_rates(*a, shared=direction < 0, rule=self.rule) for a in args]
        else:
            rates = worker_processes.run_many(
                refit_rates, args, shared=direction < 0, rule=self.rule
            )
        return np.vstack(rates)

    def _estimators(
        self, epsilon: dict[str, float] | None, strata: np.ndarray
    ) -> dict[Any, TransportMap]:
        """The run's estimator per stratum at the ε it froze (as ``flip_test`` refits)."""
        base = make_estimator(self.config, self.seed, self.device)
        out: dict[Any, TransportMap] = {}
        for s in np.unique(strata):
            m = clone(base)
            eps = None if epsilon is None else epsilon.get(str(s))
            if eps is not None and "epsilon" in m.get_params() and self.config.epsilon is None:
                m.set_params(epsilon=float(eps))
            out[s] = m
        return out

    @property
    def device(self) -> str:
        """Where the further refits run: the run's device (:func:`map_device`). With
        ``device: auto`` small entropic problems stay on the CPU here too: on an H200 machine
        the batched CUDA solver drew 1,000 refits of Adult's 500 x 500 problems no faster than
        the CPU's loop (19.5 against 23.1 ms per permutation refit, 16.4 against 9.1 ms per
        self-map refit; ``benchmarks/results/fliptest_refits_device_h200.md``)."""
        return map_device(self.config)

    def _state(self, pair: int) -> _PairState:
        with self._lock:
            if pair in self._states:
                return self._states[pair]
        job = self._jobs[pair]
        with self._lock:
            if self._points is None:
                self._points, self._names = as_points("features", self.dataset.features)
        sample = pair_sample(job, self.dataset, self.config, self._points, self._names)
        assert self.predict_proba is not None
        decide = model_decider(
            self.dataset,
            self.predict_proba,
            decision_threshold(self.dataset, self.config),
            job.attr,
            self.config.protected_as_feature,
            self.rule,
        )
        state = _PairState(
            sample.xa, sample.xb, sample.strata_a, sample.strata_b, decide, int(job.seed)
        )
        with self._lock:
            return self._states.setdefault(pair, state)


def refit_rates(
    part: str,
    est: dict[Any, TransportMap],
    xs: np.ndarray,
    xt: np.ndarray,
    ss: np.ndarray,
    st: np.ndarray,
    decide: Callable[[np.ndarray, str], np.ndarray],
    source: str,
    target: str,
    draws: list[Any],
    *,
    shared: bool,
    rule: FlipRule,
) -> np.ndarray:
    """The flipset rates of one batch of refits (rows: refits), in chunks of
    :data:`REFIT_CHUNK`: ``part`` "self-map" refits the source's random halves ``draws``
    (:func:`draw_halves`); "permutation" refits the relabelled pooled sample ``draws``
    (:func:`draw_labels`; both directions' rates side by side when the permutation null is
    ``shared`` by the pair's directions)."""
    with small_problem_threads(float(max(len(xs), len(xt))) ** 2):
        if part == "self-map":
            dec_s = rule.outcomes(decide(xs, source))
            return np.vstack(
                [
                    selfmap_rates(
                        est, xs, ss, dec_s, decide, source, draws[i : i + REFIT_CHUNK], rule=rule
                    )
                    for i in range(0, len(draws), REFIT_CHUNK)
                ]
            )
        out = []
        for i in range(0, len(draws), REFIT_CHUNK):
            fwd, rev = permutation_rates(
                est, xs, xt, ss, st, decide, source, target, draws[i : i + REFIT_CHUNK], rule=rule
            )
            if shared:
                if rev is None:  # not invertible after all: no shared draws
                    raise ValueError("a shared permutation null needs entropic maps")
                out.append(np.hstack([fwd, rev]))
            else:
                out.append(fwd)
        return np.vstack(out)
