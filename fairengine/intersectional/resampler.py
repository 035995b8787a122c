"""More bootstrap or posterior draws for the intersectional target-ε tests, drawn by the audit's
sequential decisions.

With ``target_epsilon`` set, each ε finding tests H0: ε ≤ target, and its p-value is the share
S/n of its headline distribution's draws (the multinomial or Bayesian bootstrap of the cell
counts, or the Beta posterior) with ε ≤ target (:func:`run_intersectional`).
:func:`~fairengine.decisions.decide_family` asks for more draws where the test's decision at
its multiplicity-adjusted level is open (MMCTest), so a test near its threshold is settled or
reported undetermined, never decided by the noise of the run's own B or M draws.

:class:`IntersectionalResampler` rebuilds the run's cell tables from the dataset and the
configuration (:func:`audit_setup`) and each finding's auditable masks (its point estimate),
and draws ``batch`` further replicates of the one statistic a test needs, from
``SeedSequence(seed, spawn_key=(STREAM, test number, start))``: independent of the run's
draws and of each other, reproducible in any order or thread.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from fairengine import progress
from fairengine.dataset import AuditDataset
from fairengine.intersectional.config import IntersectionalConfig
from fairengine.intersectional.estimators import (
    bootstrap_statistics,
    posterior_epsilons,
    resolve_scheme,
)
from fairengine.intersectional.method import METHOD, AuditSetup, audit_setup, epsilon_statistic
from fairengine.intersectional.metrics import differential_fairness
from fairengine.results import MethodResult

STREAM = 7
"""First spawn key of the further draws (the run itself uses ``SeedSequence(seed).spawn(2)``)."""


@dataclass(frozen=True)
class _Test:
    index: int
    grouping: str
    metric: str


class IntersectionalResampler:
    """Draws more bootstrap or posterior replicates for the target-ε tests of one
    intersectional run (a :class:`fairengine.decisions.Resampler`; module docstring).

    ``dataset``, ``config`` and ``seed`` must be what the run was given."""

    def __init__(
        self,
        dataset: AuditDataset,
        config: IntersectionalConfig,
        result: MethodResult,
        *,
        seed: int = 0,
    ) -> None:
        self.dataset = dataset
        self.config = config
        self.seed = int(seed)
        self._tests: dict[str, _Test] = {}
        self._setup: AuditSetup | None = None
        self._masks: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        usable = (
            result.method == METHOD
            and result.status == "ok"
            and config.enabled
            and config.target_epsilon is not None
        )
        if not usable:
            return
        for i, f in enumerate(result.findings):
            parts = f.key.split(".")
            if f.resampling and len(parts) == 3 and parts[0] == "df_eps":
                self._tests[f.key] = _Test(i, parts[2], parts[1])

    def can_extend(self, key: str) -> bool:
        return key in self._tests

    def draw(self, key: str, part: str, start: int, batch: int) -> int:
        test = self._tests[key]
        setup, masks = self._prepare(test)
        ss = np.random.SeedSequence(self.seed, spawn_key=(STREAM, test.index, int(start)))
        rng = np.random.default_rng(ss)
        cfg = self.config
        progress.report(METHOD, f"more {part} draws for {key}: {start:,} -> {start + batch:,}")
        if part == "bootstrap":
            stat = epsilon_statistic(setup, cfg, test.grouping, test.metric, masks)
            scheme = resolve_scheme(setup.table, cfg.bootstrap_scheme)
            draws = bootstrap_statistics(setup.table, {key: stat}, batch, rng=rng, scheme=scheme)[
                key
            ]
        elif part == "posterior":
            draws = posterior_epsilons(
                setup.tables[test.grouping],
                [test.metric],
                masks,
                batch,
                prior=(cfg.prior_alpha, cfg.prior_beta),
                outcomes=cfg.outcomes,
                rng=rng,
            )[test.metric]
        else:
            raise ValueError(f"{key}: the intersectional tests have no part {part!r}")
        assert cfg.target_epsilon is not None
        return int(np.sum(np.asarray(draws) <= cfg.target_epsilon))

    def _prepare(self, test: _Test) -> tuple[AuditSetup, Any]:
        """The run's tables and the test's point-estimate masks (built once, thread-safe)."""
        with self._lock:
            if self._setup is None:
                self._setup = audit_setup(self.dataset, self.config)
            setup = self._setup
            key = (test.grouping, test.metric)
            if key not in self._masks:
                self._masks[key] = differential_fairness(
                    setup.tables[test.grouping],
                    test.metric,
                    outcomes=self.config.outcomes,
                    **setup.smooth,
                    **setup.common,
                ).masks
            return setup, self._masks[key]
