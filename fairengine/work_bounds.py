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
from fairengine.permutation.config import n_pairs, permutation_bound_problem


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
