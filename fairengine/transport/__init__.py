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
"""

from fairengine.transport._base import TransportConvergenceError, TransportMap
from fairengine.transport.entropic import EntropicMap, energy_distance, sinkhorn_potentials
from fairengine.transport.exact import ExactOTMap
from fairengine.transport.gan import GANMap
from fairengine.transport.linear import LinearOTMap
from fairengine.transport.persistence import MapCache, array_fingerprint, fit_key
from fairengine.transport.validation import MapValidation, validate_map

ESTIMATORS = {
    "entropic": EntropicMap,
    "exact": ExactOTMap,
    "linear": LinearOTMap,
    "gan": GANMap,
}

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
