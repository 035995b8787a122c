"""Optimal-transport maps between two samples, scikit-learn style (``fit(source, target)``,
``transform(x)``), on pooled-standardized features with squared-Euclidean cost by default.

* :class:`EntropicMap` — primary: Sinkhorn potentials, out-of-sample softmax map, ε chosen on
  held-out data, convergence checked, out-of-distribution guard.
* :class:`ExactOTMap` — ``ot.emd`` with a raised iteration cap: the paper's in-sample bijection.
* :class:`LinearOTMap` — Gaussian closed form (baseline).
* :class:`GANMap` — the paper's WGAN with transport cost (torch, seeded).
* :func:`validate_map` — the held-out validation protocol (``fliptest_ot.md`` §4.3).
* ``save(path)`` / ``load(path)`` / ``to_state()`` / ``from_state()`` on every map, and
  :class:`MapCache`, a content-addressed directory of fits (:mod:`.persistence`).

The names are exported lazily (:mod:`fairengine.lazy_exports`): torch and POT are imported
with the first map that needs them, so that an audit whose FlipTest results come from the
cache (and every module that only names a map's type) never imports them (1.5 s of a re-run).
"""

from typing import TYPE_CHECKING, Any

from fairengine.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from fairengine.transport._base import TransportConvergenceError, TransportMap
    from fairengine.transport.entropic import EntropicMap, energy_distance, sinkhorn_potentials
    from fairengine.transport.exact import ExactOTMap
    from fairengine.transport.gan import GANMap
    from fairengine.transport.linear import LinearOTMap
    from fairengine.transport.persistence import MapCache, array_fingerprint, fit_key
    from fairengine.transport.validation import MapValidation, validate_map

    ESTIMATORS: dict[str, type[TransportMap]]

_lazy_getattr, _lazy_dir = lazy_exports(
    __name__,
    {
        "TransportConvergenceError": "_base",
        "TransportMap": "_base",
        "EntropicMap": "entropic",
        "energy_distance": "entropic",
        "sinkhorn_potentials": "entropic",
        "ExactOTMap": "exact",
        "GANMap": "gan",
        "LinearOTMap": "linear",
        "MapCache": "persistence",
        "array_fingerprint": "persistence",
        "fit_key": "persistence",
        "MapValidation": "validation",
        "validate_map": "validation",
    },
)


def __getattr__(name: str) -> Any:
    if name == "ESTIMATORS":  # the configured name (``methods.fliptest.estimator``) -> class
        estimators = {
            "entropic": _lazy_getattr("EntropicMap"),
            "exact": _lazy_getattr("ExactOTMap"),
            "linear": _lazy_getattr("LinearOTMap"),
            "gan": _lazy_getattr("GANMap"),
        }
        globals()["ESTIMATORS"] = estimators
        return estimators
    return _lazy_getattr(name)


def __dir__() -> list[str]:
    return sorted([*_lazy_dir(), "ESTIMATORS"])


__all__ = [
    "ESTIMATORS",
    "EntropicMap",
    "ExactOTMap",
    "GANMap",
    "LinearOTMap",
    "MapCache",
    "MapValidation",
    "TransportConvergenceError",
    "TransportMap",
    "array_fingerprint",
    "energy_distance",
    "fit_key",
    "sinkhorn_potentials",
    "validate_map",
]
