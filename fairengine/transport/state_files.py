"""A fitted transport map's state as one ``.npz`` file (no pickles).

A state is ``{"header": JSON-able dict, "arrays": {name: ndarray}}``: the constructor parameters
and scalar learned attributes in the header, the learned arrays as members. Dicts with
non-string keys and tuples survive the JSON round trip (:func:`encode_value`). Loading never
unpickles (``allow_pickle=False``), so a map file from an artifact store cannot run code.
:class:`~fairengine.transport._base.TransportMap` saves and loads through these functions;
:mod:`fairengine.transport.persistence` caches fits on top of them.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from fairengine.errors import DataContractError

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
            # two mappings (not one merged dict): a clash of names stays a TypeError
            header_member: dict[str, Any] = {_STATE_MEMBER: header}
            np.savez(fh, **header_member, **arrays)
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
