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
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairengine.errors import DataContractError

if TYPE_CHECKING:
    from fairengine.transport._base import TransportMap

FORMAT_VERSION = 2
"""Version of the map file layout; part of every cache key."""

_STATE_MEMBER = "__state__"


# ----------------------------------------------------------------------------- JSON encoding
def encode_value(value: Any) -> Any:
    """``value`` as JSON-compatible data. Dicts with non-string keys (e.g. ε → score) become
    ``{"__items__": [[key, value], ...]}`` and tuples ``{"__tuple__": [...]}`` so that
    :func:`decode_value` restores them exactly; numpy scalars become Python numbers."""
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: encode_value(v) for k, v in value.items()}
        return {"__items__": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise DataContractError(
        f"cannot store a value of type {type(value).__name__} in a map file; store arrays as "
        "numpy arrays and everything else as numbers, strings, lists or dicts"
    )


def decode_value(value: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if isinstance(value, dict):
        if set(value) == {"__items__"}:
            return {decode_value(k): decode_value(v) for k, v in value["__items__"]}
        if set(value) == {"__tuple__"}:
            return tuple(decode_value(v) for v in value["__tuple__"])
        return {k: decode_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return value


# ----------------------------------------------------------------------------- files
def write_state(state: dict[str, Any], path: str | Path) -> Path:
    """Write a map state (``{"header": JSON-able dict, "arrays": {name: ndarray}}``) to
    ``path`` as ``.npz``, atomically (a temporary file in the same directory, then a rename),
    so concurrent writers of the same cache key never leave a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = state["arrays"]
    for name, arr in arrays.items():
        if not isinstance(arr, np.ndarray) or arr.dtype.hasobject:
            raise DataContractError(f"map state array {name!r} must be a numeric numpy array")
    header = np.array(json.dumps(encode_value(state["header"]), sort_keys=True))
    # a unique temporary name opened with "x" (created with the umask's permissions, unlike
    # tempfile.mkstemp's 0600, so a shared cache folder stays readable)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as fh:
            np.savez(fh, **{_STATE_MEMBER: header}, **arrays)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def read_state(path: str | Path) -> dict[str, Any]:
    """Read a file written by :func:`write_state` (no pickles are ever loaded)."""
    path = Path(path)
    if not path.is_file():
        raise DataContractError(f"map file {str(path)!r} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            header = json.loads(str(npz[_STATE_MEMBER]))
            arrays = {k: npz[k] for k in npz.files if k != _STATE_MEMBER}
    except (ValueError, KeyError, OSError) as exc:
        raise DataContractError(
            f"{str(path)!r} is not a FairEngine map file ({type(exc).__name__}: {exc})"
        ) from None
    header = decode_value(header)
    if header.get("format") != FORMAT_VERSION:
        raise DataContractError(
            f"map file {str(path)!r} has format {header.get('format')!r}; this version of "
            f"FairEngine reads format {FORMAT_VERSION} (refit the map)"
        )
    return {"header": header, "arrays": arrays}


# ----------------------------------------------------------------------------- cache keys
def array_fingerprint(x: Any) -> str:
    """SHA-256 of a sample's content: shape, then the float64 C-order bytes."""
    arr = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    h = hashlib.sha256(repr(arr.shape).encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def estimator_code_hash(estimator: TransportMap) -> str:
    """SHA-256 of the source of the estimator's module and of the shared base module."""
    from fairengine.transport import _base

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


FitFunction = Callable[["TransportMap", np.ndarray, np.ndarray], tuple[np.ndarray, "TransportMap"]]


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
        from fairengine.transport._base import TransportMap

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
