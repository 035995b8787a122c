"""Settings and input errors of :func:`fairengine.comparison.compare_models`."""

from __future__ import annotations

from dataclasses import dataclass

from fairengine.errors import FairEngineError

#: Most contrast draws kept at once (B × 4Q numbers, 8 bytes each: 128 MiB).
MAX_DRAW_ENTRIES = 1 << 24


class ComparisonInputError(FairEngineError):
    """Bad input to :func:`~fairengine.comparison.compare_models` (the message names the
    parameter and what was expected)."""


@dataclass(frozen=True)
class ComparisonResampling:
    """Resampling settings of the paired maxT bootstrap.

    ``first``: resamples of the first look (B = 1999); ``growth``: each further batch is
    ``growth`` times the previous one (as :class:`fairengine.decisions.ResamplingSettings`);
    ``max_resamples``: the cap of drawn resamples (further lowered so that the stored contrast
    draws hold at most :data:`MAX_DRAW_ENTRIES` numbers);
    ``risk``: ε, the probability allowed for any Monte-Carlo interval of the procedure to miss
    (spent in equal parts over the looks, see :mod:`fairengine.comparison.compare`).
    """

    first: int = 1999
    growth: float = 2.0
    max_resamples: int = 31_999
    risk: float = 1e-3

    def __post_init__(self) -> None:
        def bad(name: str, what: str, value: object) -> ComparisonInputError:
            return ComparisonInputError(f"resampling.{name} {what}, got {value!r}")

        for name in ("first", "max_resamples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 99:
                raise bad(name, "must be an integer >= 99", v)
        if self.max_resamples < self.first:
            raise bad("max_resamples", f"must be >= first ({self.first})", self.max_resamples)
        g = self.growth
        if isinstance(g, bool) or not isinstance(g, int | float) or not 1.0 < float(g) <= 100.0:
            raise bad("growth", "must be a number in (1, 100]", g)
        r = self.risk
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0.0 < float(r) < 1.0:
            raise bad("risk", "must lie in (0, 1)", r)

    def schedule(self, cap: int | None = None) -> tuple[int, ...]:
        """Cumulative drawn resamples at each look: ``first``, then batches growing by
        ``growth`` up to the cap (the smaller of ``max_resamples`` and ``cap``)."""
        top = self.max_resamples if cap is None else max(self.first, min(self.max_resamples, cap))
        totals = [self.first]
        batch = float(self.first)
        while totals[-1] < top:
            batch *= self.growth
            totals.append(min(top, totals[-1] + max(1, round(batch))))
        return tuple(totals)
