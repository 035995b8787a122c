"""More permutations for the regression method's tests, when the audit's sequential decisions
ask for them (a :class:`fairengine.pair_resampler.PairResampler`: pair i's batch after
``start`` draws from ``pair_seed(seed, i, start)``, one batch serves every test of the pair)."""

from __future__ import annotations

import numpy as np

from fairengine.finding_keys import pair_token, part_token
from fairengine.pair_resampler import PairResampler
from fairengine.regression.method import METHOD
from fairengine.regression.permutation import pair_permutation_tests

_DISTANCES = ("ks", "wasserstein")


class RegressionResampler(PairResampler):
    """Draws more permutations for the tests of ``regression_metrics``."""

    method = METHOD
    task = "regression"

    def _names(self) -> tuple[str, ...]:
        return (*self.config.metrics, *(_DISTANCES if self.config.distance_tests else ()))

    def extends(self, key: str) -> bool:
        return key.split(".", 1)[0] in {f"reg_{n}" for n in self._names()}

    def exceedances(
        self, attr: str, codes: np.ndarray, a: int, b: int, seed: np.random.SeedSequence, batch: int
    ) -> dict[str, int]:
        ds, cfg = self.dataset, self.config
        assert ds.prediction is not None
        categories = ds.groups[attr].categories
        tests = pair_permutation_tests(
            ds.label,
            ds.prediction,
            codes,
            categories,
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
        )
        token = f"{part_token(attr)}.{pair_token(categories[a], categories[b])}"
        out = {f"reg_{m}.{token}": int(tests.difference(m).n_extreme) for m in cfg.metrics}
        if cfg.distance_tests:
            out.update({f"reg_{d}.{token}": int(tests.distance(d).n_extreme) for d in _DISTANCES})
        return out
