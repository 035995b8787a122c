"""Up-front bounds on an audit's work: every quantity that grows with the data's levels
(groups per attribute, pairs of groups, tests, intersection cells) has a documented setting, and
an audit over its bound stops before any method runs, naming the setting to change.

A 300-level attribute (a zip code) used to start 44,850 pair-wise permutation tests and run for
minutes; :func:`check_work_bounds` refuses it in milliseconds:

* ``validation.max_groups`` — levels of one protected attribute (pairs grow as G(G−1)/2 in
  group parity, group metrics and the permutation tests);
* ``methods.permutation_tests.max_tests`` — Σ over tested attributes of G(G−1)/2 × metrics;
* ``methods.intersectional.max_levels`` / ``max_intersections`` — levels and cells of the
  intersection grid (checked again, on the binned data, by the method itself);
* FlipTest (``max_pairs``, ``max_per_group``) and the individual test (``max_rows``) bound
  themselves by sampling, so they need no check here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fairengine.config import AuditConfig
from fairengine.errors import ConfigError
from fairengine.permutation.config import PermutationConfig


def n_pairs(levels: int) -> int:
    """Unordered pairs of ``levels`` groups: G(G−1)/2."""
    return levels * (levels - 1) // 2


def planned_permutation_tests(config: PermutationConfig, levels: Mapping[str, int]) -> int:
    """Tests :func:`~fairengine.permutation.run_permutation_tests` will run: for each tested
    attribute, its pairs of groups times the number of metrics."""
    attrs = list(levels) if config.attributes is None else list(config.attributes)
    return sum(n_pairs(levels[a]) for a in attrs if a in levels) * len(config.metrics)


def permutation_bound_problem(config: PermutationConfig, levels: Mapping[str, int]) -> str | None:
    """The message when the permutation tests exceed ``max_tests``, else ``None``."""
    planned = planned_permutation_tests(config, levels)
    if planned <= config.max_tests:
        return None
    attrs = list(levels) if config.attributes is None else list(config.attributes)
    parts = ", ".join(f"{a}: {levels[a]} groups, {n_pairs(levels[a]):,} pairs" for a in attrs)
    return (
        f"the permutation tests would run {planned:,} tests ({parts}; × {len(config.metrics)} "
        f"metrics), more than methods.permutation_tests.max_tests={config.max_tests}; merge or "
        "bin groups, restrict methods.permutation_tests.attributes or .metrics, or raise "
        "methods.permutation_tests.max_tests"
    )


def _binned_levels(spec: Any) -> int | None:
    """Levels an ``intersectional.bins`` entry makes: edges -> len − 1, a count -> itself."""
    if isinstance(spec, list):
        return max(len(spec) - 1, 1)
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec
    return None


def check_work_bounds(cfg: AuditConfig, levels: Mapping[str, int]) -> None:
    """Raise one :class:`ConfigError` listing every bound the audit would exceed.

    ``levels``: distinct values per protected attribute (after cleaning, before binning).
    """
    problems: list[str] = []
    cap = cfg.validation.max_groups
    for attr, n in levels.items():
        if n > cap:
            problems.append(
                f"protected attribute {attr!r} has {n:,} groups, more than "
                f"validation.max_groups={cap} ({n_pairs(n):,} pairs of groups to compare); "
                "merge or bin its values (e.g. regions instead of zip codes) or raise "
                "validation.max_groups"
            )
    perm = cfg.methods.permutation_tests
    if perm.enabled:
        message = permutation_bound_problem(perm, levels)
        if message:
            problems.append(message)
    inter = cfg.methods.intersectional
    if inter.enabled:
        attrs = list(levels) if inter.attributes is None else list(inter.attributes)
        grid = {
            a: _binned_levels(inter.bins[a]) if a in inter.bins else levels.get(a) for a in attrs
        }
        known = {a: n for a, n in grid.items() if n is not None}
        problems += [
            f"protected attribute {a!r} has {n:,} levels, more than methods.intersectional."
            f"max_levels={inter.max_levels}; give methods.intersectional.bins.{a} edges, leave "
            "it out of methods.intersectional.attributes or raise the cap"
            for a, n in known.items()
            if a not in inter.bins and n > inter.max_levels
        ]
        cells = math.prod(known.values()) if known else 0
        if cells > inter.max_intersections:
            shown = " × ".join(f"{a} ({n})" for a, n in known.items())
            problems.append(
                f"the intersections of {shown} form {cells:,} cells, more than "
                f"methods.intersectional.max_intersections={inter.max_intersections}; audit "
                "fewer attributes (methods.intersectional.attributes), bin their levels or "
                "raise the cap"
            )
    if problems:
        raise ConfigError(
            problems[0]
            if len(problems) == 1
            else "the audit exceeds its work bounds:\n" + "\n".join(f"  - {p}" for p in problems),
            problems,
        )
