"""More permutations for the multiclass method's tests, when the audit's sequential decisions
ask for them (a :class:`fairengine.pair_resampler.PairResampler`: pair i's batch after
``start`` draws from ``pair_seed(seed, i, start)``, one batch serves every test of the pair)."""

from __future__ import annotations

import numpy as np

from fairengine.multiclass.findings import multiclass_findings
from fairengine.multiclass.method import METHOD, read_predictions
from fairengine.multiclass.permutation import pair_permutation_tests
from fairengine.pair_resampler import PairResampler


class MulticlassResampler(PairResampler):
    """Draws more permutations for the tests of ``multiclass_metrics``."""

    method = METHOD
    task = "multiclass"

    def extends(self, key: str) -> bool:
        return key.startswith("mc_") and not key.startswith(("mc_group_", "mc_epsilon"))

    def exceedances(
        self, attr: str, codes: np.ndarray, a: int, b: int, seed: np.random.SeedSequence, batch: int
    ) -> dict[str, int]:
        ds, cfg = self.dataset, self.config
        tests = pair_permutation_tests(
            ds.label,
            read_predictions(ds, cfg),
            codes,
            ds.groups[attr].categories,
            ds.classes,
            group_a=a,
            group_b=b,
            weights=ds.weights,
            metrics=tuple(cfg.metrics),
            distance_tests=cfg.distance_tests,
            n_permutations=batch,
            alternative=cfg.alternative,
            confidence_level=cfg.confidence_level,
            seed=seed,
            attribute=attr,
            probabilities=cfg.probabilities,
        )
        return {
            f.key: int(f.resampling[0].exceedances)
            for f in multiclass_findings(pairs=(tests,))
            if f.resampling
        }
