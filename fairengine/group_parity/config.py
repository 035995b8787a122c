"""Configuration of the group-parity step (``methods.group_parity`` in the audit YAML)."""

from __future__ import annotations

from dataclasses import dataclass

from fairengine.errors import ConfigError

#: Values of ``methods.group_parity.exact`` (see :mod:`fairengine.group_parity.method`).
GROUP_PARITY_EXACT = ("auto", "always", "never")


@dataclass
class GroupParityConfig:
    """Demographic parity and equalized-odds gaps
    (:func:`fairengine.group_parity.method.group_parity`).

    ``exact``: where the tolerance p-value of a pair comes from the exact unconditional test
    (:mod:`fairengine.exact_tolerance`) instead of the Newcombe interval inversion: ``auto``
    (default: unweighted hard predictions, the smaller group of the pair at most
    ``exact_max_rows`` rows, the outcome table within the exact test's cell limit),
    ``always`` (wherever the test is defined; a warning names the pairs where it is not) or
    ``never``. ``exact_max_rows``: the auto rule's bound (default 200; docs/group_parity.md).
    """

    enabled: bool = True
    tolerance: float = 0.05
    confidence_level: float = 0.95
    exact: str = "auto"
    exact_max_rows: int = 200

    def __post_init__(self) -> None:
        if not self.tolerance >= 0:
            raise ConfigError(f"methods.group_parity.tolerance must be >= 0, got {self.tolerance}")
        if not 0 < self.confidence_level < 1:
            raise ConfigError(
                "methods.group_parity.confidence_level must lie in (0, 1), "
                f"got {self.confidence_level}"
            )
        if self.exact not in GROUP_PARITY_EXACT:
            raise ConfigError(
                f"methods.group_parity.exact must be one of {list(GROUP_PARITY_EXACT)}, "
                f"got {self.exact!r}"
            )
        if isinstance(self.exact_max_rows, bool) or not (
            isinstance(self.exact_max_rows, int) and self.exact_max_rows >= 1
        ):
            raise ConfigError(
                "methods.group_parity.exact_max_rows must be a whole number >= 1, "
                f"got {self.exact_max_rows!r}"
            )
