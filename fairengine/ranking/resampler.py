"""More permutations for the ranking method's tests, when the audit's sequential decisions ask
for them (a :class:`fairengine.pair_resampler.PairResampler`: pair i's batch after ``start``
draws from ``pair_seed(seed, i, start)``, one batch serves every test of the pair)."""

from __future__ import annotations

import numpy as np

from fairengine.pair_resampler import PairResampler
from fairengine.ranking.findings import ranking_findings
from fairengine.ranking.method import METHOD, pair_tests


class RankingResampler(PairResampler):
    """Draws more within-list permutations for the tests of ``ranking_metrics``."""

    method = METHOD
    task = "ranking"

    def extends(self, key: str) -> bool:
        return key.startswith(("rank_exposure.", "rank_topk_rate_"))

    def exceedances(
        self, attr: str, codes: np.ndarray, a: int, b: int, seed: np.random.SeedSequence, batch: int
    ) -> dict[str, int]:
        tests = pair_tests(
            self.dataset, self.config, attr, codes, a, b, n_permutations=batch, seed=seed
        )
        return {
            f.key: int(f.resampling[0].exceedances)
            for f in ranking_findings(pairs=(tests,))
            if f.resampling
        }
