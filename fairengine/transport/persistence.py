"""Fitted transport maps as files, and a content-addressed cache of fits.

A fitted map's *state* is its constructor parameters plus its learned attributes (the names
ending in ``_``, scikit-learn's convention): arrays such as the entropic map's potential and
support points, the exact map's plan images and dual potential, the pooled standardization
(``mean_``, ``scale_``), and scalars such as the selected ε. :meth:`TransportMap.save` writes
it as one ``.npz`` file: every array as a member, everything else as one JSON member
(``__state__``). Loading never unpickles (``allow_pickle=False``), so a map file from an
artifact store cannot run code. ``load(save(m))`` reproduces ``m.transform`` bit for bit.

:class:`MapCache` stores fits under a key that hashes everything a fit depends on
(Black et al. 2020 fit one map per direction; ``fliptest_ot.md`` §4.2: "cache each fit on
(data hash, cost, ε, seed)"):

* the exact content of the source and target arrays (SHA-256 of shape, dtype and bytes);
* the estimator class and all its parameters (cost, ε or the ε grid, seed, iteration caps ...);
* the source code of the estimator's module and of the shared base, so a change in the
  mathematics invalidates old fits;
* :data:`FORMAT_VERSION`.

A second fit with the same key loads the file instead of fitting.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fairengine.errors import DataContractError
from fairengine.transport import _base
from fairengine.transport._base import TransportMap
from fairengine.transport.state_files import FORMAT_VERSION, encode_value


# ----------------------------------------------------------------------------- cache keys
def array_fingerprint(x: Any) -> str:
    """SHA-256 of a sample's content: shape, then the float64 C-order bytes."""
    arr = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    h = hashlib.sha256(repr(arr.shape).encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def estimator_code_hash(estimator: TransportMap) -> str:
    """SHA-256 of the source of the estimator's module and of the shared base module."""
    h = hashlib.sha256()
    for module in dict.fromkeys([inspect.getmodule(type(estimator)), _base]):
        if module is not None:
            h.update(inspect.getsource(module).encode())
    return h.hexdigest()


def fit_key(estimator: TransportMap, source: Any, target: Any) -> tuple[str, dict[str, Any]]:
    """Cache key of ``estimator.fit(source, target)`` and the ingredients it hashes."""
    ingredients = {
        "format": FORMAT_VERSION,
        "estimator": type(estimator).__name__,
        "params": encode_value(estimator.get_params()),
        "source": array_fingerprint(source),
        "target": array_fingerprint(target),
        "code": estimator_code_hash(estimator),
    }
    key = hashlib.sha256(json.dumps(ingredients, sort_keys=True).encode()).hexdigest()
    return key, ingredients


FitFunction = Callable[[TransportMap, np.ndarray, np.ndarray], tuple[np.ndarray, TransportMap]]


def _default_fit(m: TransportMap, xs: np.ndarray, xt: np.ndarray) -> tuple[np.ndarray, Any]:
    return m.fit_transform(xs, xt), m


class MapCache:
    """Content-addressed directory of fitted maps: ``<directory>/<key>.npz``.

    ``fit_transform(estimator, source, target)`` returns the in-sample images, the fitted map,
    the file and whether it was loaded: a hit loads the map saved by an earlier call with the
    same key (module docstring) and computes the images with
    :meth:`TransportMap.transform_fitted`, which equals what ``fit_transform`` returned.
    ``hits`` and ``misses`` count the calls. A file that cannot be read is refitted and
    overwritten.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()
        self.hits = 0
        self.misses = 0

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.npz"

    def fit_transform(
        self,
        estimator: TransportMap,
        source: np.ndarray,
        target: np.ndarray,
        fit: FitFunction | None = None,
    ) -> tuple[np.ndarray, TransportMap, Path, bool]:
        """(images of ``source``, fitted map, its file, loaded from the cache?).

        ``fit(estimator, source, target) -> (images, fitted map)`` does the fitting on a miss
        (default ``estimator.fit_transform``); the map it returns is saved under the key of
        ``estimator`` as given, so a fit that adjusted its own parameters (a wider ε after a
        non-converging Sinkhorn) is found again by the same request.
        """
        key, ingredients = fit_key(estimator, source, target)
        path = self.path(key)
        if path.is_file():
            try:
                fitted = TransportMap.load(path)
            except DataContractError:
                fitted = None
            if fitted is not None and type(fitted) is type(estimator):
                self.hits += 1
                return fitted.transform_fitted(source), fitted, path, True
        images, fitted = (fit or _default_fit)(estimator, source, target)
        fitted.save(path, provenance={"cache_key": key, **ingredients})
        self.misses += 1
        return images, fitted, path, False
