"""Shared machinery of the transport-map estimators: input checks and pooled standardization.

Every map is fitted between a ``source`` and a ``target`` sample (rows = individuals, columns =
features) and, by default, works on features standardized with the *pooled* mean and standard
deviation of source ∪ target, so the squared-Euclidean cost weighs features comparably
(Black et al. 2020 standardize the Lipton data the same way). ``transform`` takes and returns
points in the original units.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from fairengine.errors import DataContractError, FairEngineError
from fairengine.transport.state_files import (
    FORMAT_VERSION,
    decode_value,
    encode_value,
    read_state,
    write_state,
)


class TransportConvergenceError(FairEngineError):
    """An OT solver stopped before reaching its tolerance (the message names the setting)."""


def as_points(name: str, x: Any, n_features: int | None = None) -> tuple[np.ndarray, list[str]]:
    """``x`` as a float64 ``(n, d)`` array plus feature names; clear errors for bad input.

    Accepts a DataFrame (numeric columns only), a 2-D array or a 1-D array (one feature).
    Raises :class:`DataContractError` naming ``name`` (and the column) for non-numeric columns,
    missing or infinite values, an empty sample or a wrong number of features.
    """
    if isinstance(x, pd.DataFrame):
        bad = [str(c) for c in x.columns if not pd.api.types.is_numeric_dtype(x[c].dtype)]
        if bad:
            raise DataContractError(
                f"{name}: feature column(s) {bad} are not numeric; encode them (e.g. one-hot or "
                "ordinal codes) before fitting a transport map"
            )
        names = [str(c) for c in x.columns]
        arr = x.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        try:
            arr = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise DataContractError(
                f"{name} must be numeric (an array or a DataFrame of numeric columns)"
            ) from None
        if arr.ndim == 1:
            arr = arr[:, None]
        names = [f"x{j}" for j in range(arr.shape[1])] if arr.ndim == 2 else []
    if arr.ndim != 2:
        raise DataContractError(f"{name} must be 2-D (rows x features), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DataContractError(f"{name} is empty (shape {arr.shape})")
    bad_rows = ~np.isfinite(arr)
    if bad_rows.any():
        cols = np.flatnonzero(bad_rows.any(axis=0))
        raise DataContractError(
            f"{name} has {int(bad_rows.sum())} missing or infinite value(s) in feature(s) "
            f"{[names[c] for c in cols[:5]]}; impute or drop them before fitting a transport map"
        )
    if n_features is not None and arr.shape[1] != n_features:
        raise DataContractError(
            f"{name} has {arr.shape[1]} features but the map was fitted on {n_features}"
        )
    return arr, names


_MAP_CLASSES: dict[str, type[TransportMap]] = {}
"""Subclasses of :class:`TransportMap` by class name, for loading saved states."""


class TransportMap(BaseEstimator):
    """Base class: ``fit(source, target)`` then ``transform(x)`` (scikit-learn conventions).

    Subclasses implement ``_fit(zs, zt)`` and ``_transform(z)`` on standardized arrays.
    Learned attributes (``mean_``, ``scale_``, ``n_features_in_``, ``feature_names_in_``) end in
    an underscore.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _MAP_CLASSES[cls.__name__] = cls

    standardize: bool = True
    min_samples: int = 10
    constant_features: str = "raise"

    # ------------------------------------------------------------------ public API
    def fit(self, source: Any, target: Any) -> TransportMap:
        """Fit the map pushing the ``source`` sample onto the ``target`` sample.

        A feature constant over source ∪ target carries no information for the map: with
        ``constant_features="raise"`` (default) it is an error naming the feature; with
        ``"hold"`` the map is fitted on the other features and every image keeps the constant
        (``active_`` marks the features the map moves). FlipTest uses "hold": its refits on
        halves and resamples of one group routinely meet one-hot columns constant there.
        """
        if self.constant_features not in ("raise", "hold"):
            raise DataContractError(
                f"constant_features must be 'raise' or 'hold', got {self.constant_features!r}"
            )
        xs, names = as_points("source", source)
        xt, _ = as_points("target", target, xs.shape[1])
        for label, arr in (("source", xs), ("target", xt)):
            if arr.shape[0] < self.min_samples:
                raise DataContractError(
                    f"{label} has {arr.shape[0]} rows; a transport map needs at least "
                    f"min_samples={self.min_samples} per group"
                )
        self.n_features_in_ = xs.shape[1]
        self.feature_names_in_ = names
        pooled = np.vstack([xs, xt])
        center = pooled.mean(axis=0)
        sd = pooled.std(axis=0)
        self.active_ = sd > 1e-12 * np.maximum(1.0, np.abs(center))
        const = [names[j] for j in np.flatnonzero(~self.active_)]
        if const and (self.constant_features == "raise" or len(const) == len(names)):
            raise DataContractError(
                f"feature(s) {const} are constant over source and target; drop them (they carry "
                "no information for the map)"
                + ("" if len(const) < len(names) else " - every feature is constant")
            )
        if self.standardize:
            self.mean_ = center
            self.scale_ = np.where(self.active_, sd, 1.0)
        else:
            self.mean_ = np.where(self.active_, 0.0, center)
            self.scale_ = np.ones(xs.shape[1])
        self._fit(self._za(xs), self._za(xt))
        return self

    def transform(self, x: Any) -> np.ndarray:
        """Images T(x) of new (or fitted) points, in the original units."""
        self._check_fitted()
        arr, _ = as_points("x", x, self.n_features_in_)
        return self._unza(self._transform(self._za(arr)))

    def fit_transform(self, source: Any, target: Any) -> np.ndarray:
        """Fit, then the images of the fitted source points (in-sample map)."""
        return self.fit(source, target).transform(source)

    def transform_fitted(self, source: Any) -> np.ndarray:
        """Images of the sample the map was fitted on, equal to what ``fit_transform`` returned
        (for every map but :class:`ExactOTMap` that is ``transform(source)``; the exact map
        returns its plan's bijection). Used when a fitted map is loaded from a file."""
        return self.transform(source)

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> dict[str, Any]:
        """The fitted map as ``{"header": ..., "arrays": ...}``: the class name, the
        constructor parameters (``get_params()``) and every learned attribute (names ending in
        ``_``), numpy arrays under ``arrays`` and all other values in the JSON ``header``
        (:mod:`fairengine.transport.state_files`)."""

        self._check_fitted()
        arrays: dict[str, np.ndarray] = {}
        fitted: dict[str, Any] = {}
        skip = set(self._state_skip())
        for name, value in vars(self).items():
            if not name.endswith("_") or name.startswith("_") or name in skip:
                continue
            if isinstance(value, np.ndarray):
                arrays[name] = value
            else:
                fitted[name] = encode_value(value)
        arrays.update(self._state_arrays())
        header = {
            "format": FORMAT_VERSION,
            "class": type(self).__name__,
            "params": encode_value(self.get_params()),
            "fitted": fitted,
        }
        return {"header": header, "arrays": arrays}

    @classmethod
    def from_state(cls, state: dict[str, Any], **params: Any) -> TransportMap:
        """Rebuild a fitted map from :meth:`to_state` output; ``params`` override constructor
        parameters (e.g. ``device="cpu"`` for a map fitted on a GPU). Called on
        ``TransportMap`` it builds the class named in the state."""

        header, arrays = state["header"], dict(state["arrays"])
        name = header.get("class")
        klass = _map_class(name) if cls is TransportMap else cls
        if klass.__name__ != name:
            raise DataContractError(f"the map state holds a {name}, expected {klass.__name__}")
        init = {**decode_value(header["params"]), **params}
        m = klass(**init)
        for attr, value in decode_value(header["fitted"]).items():
            setattr(m, attr, value)
        own = {k: v for k, v in arrays.items() if k.endswith("_") and "." not in k}
        for attr, value in own.items():
            setattr(m, attr, value)
        m._restore_arrays({k: v for k, v in arrays.items() if k not in own})
        m._check_fitted()
        return m

    def save(self, path: str | Path, provenance: dict[str, Any] | None = None) -> Path:
        """Write the fitted map to ``path`` (``.npz``; :mod:`fairengine.transport.persistence`).
        ``provenance`` (JSON-able: data fingerprints, cache key ...) is stored beside it."""

        state = self.to_state()
        if provenance:
            state["header"]["provenance"] = provenance
        return write_state(state, path)

    @classmethod
    def load(cls, path: str | Path, **params: Any) -> TransportMap:
        """Read a map written by :meth:`save` (any map class when called on ``TransportMap``);
        ``params`` override constructor parameters."""

        return cls.from_state(read_state(path), **params)

    def _state_skip(self) -> tuple[str, ...]:
        """Learned attributes stored by :meth:`_state_arrays` instead (e.g. torch modules)."""
        return ()

    def _state_arrays(self) -> dict[str, np.ndarray]:
        """Extra arrays to store; names must contain a '.' (e.g. ``generator_.net.0.weight``)."""
        return {}

    def _restore_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Inverse of :meth:`_state_arrays`."""
        if arrays:
            raise DataContractError(
                f"{type(self).__name__} state has unexpected arrays {sorted(arrays)[:5]}"
            )

    # ------------------------------------------------------------------ helpers
    def _z(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean_) / self.scale_

    def _unz(self, z: np.ndarray) -> np.ndarray:
        return z * self.scale_ + self.mean_

    def _za(self, x: np.ndarray) -> np.ndarray:
        """Standardized coordinates of the features the map moves (``active_``)."""
        return self._z(x)[:, self.active_]

    def _unza(self, za: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`_za`: held (constant) features get their fitted constant."""
        z = np.zeros((len(za), self.n_features_in_))
        z[:, self.active_] = za
        return self._unz(z)

    def _check_fitted(self) -> None:
        if not hasattr(self, "n_features_in_"):
            raise FairEngineError(f"{type(self).__name__} is not fitted; call fit(source, target)")

    def _fit(self, zs: np.ndarray, zt: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _transform(self, z: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


def _map_class(name: Any) -> type[TransportMap]:
    """The map class a saved state names (every subclass of :class:`TransportMap` registers
    itself by class name when it is defined; the package imports all of them)."""
    if name not in _MAP_CLASSES:
        raise DataContractError(
            f"unknown transport map class {name!r} in the state; expected one of "
            f"{sorted(_MAP_CLASSES)}"
        )
    return _MAP_CLASSES[name]


def sq_euclidean(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Squared-Euclidean cost matrix C_ij = ‖x_i − y_j‖² (float64, clipped at 0)."""
    c = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * x @ y.T
    return np.maximum(c, 0.0)


def cost_matrix(x: np.ndarray, y: np.ndarray, cost: str) -> np.ndarray:
    """Cost matrix for ``cost`` in {"sqeuclidean", "sqcityblock"} (the latter: (Σ|x−y|)²,
    the cost of FlipTest's exact-OT code)."""
    if cost == "sqeuclidean":
        return sq_euclidean(x, y)
    if cost == "sqcityblock":
        from scipy.spatial.distance import cdist

        return cdist(x, y, "cityblock") ** 2
    raise DataContractError(f"cost must be 'sqeuclidean' or 'sqcityblock', got {cost!r}")
