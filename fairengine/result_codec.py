"""A lossless JSON codec for typed result dataclasses, driven by their type hints.

Every method's result is a frozen dataclass (nested dataclasses for its tables); this module
turns one into strict JSON and back without a hand-written ``to_dict``/``from_dict`` per class:

* :func:`encode` maps a dataclass to a dict of its fields, tuples and lists to lists, mappings to
  dicts with string keys, numpy scalars and arrays to Python values, and non-finite floats to the
  strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (so ``json.dumps(..., allow_nan=False)``
  succeeds);
* :func:`decode` rebuilds the value of a type from that JSON, checking it against the type hint
  on the way down: ``bool``, ``int``, ``float``, ``str``, ``None``, :data:`typing.Literal`,
  unions (``X | None``, ``float | str``: the arms are tried in order), ``list[T]``,
  ``tuple[T, ...]``, ``tuple[A, B]``, ``dict[str, T]``, nested dataclasses and
  :data:`JSONValue` (any JSON value, kept as is). A value that does not fit raises
  :class:`ResultFormatError` naming its path (``details.attributes.sex.groups[0].n``) and what was
  expected; an unknown key is an error too, so nothing in a file is silently dropped.

The round trip is lossless: ``decode(type(x), json.loads(json.dumps(encode(x)))) == x`` for every
value whose fields carry the types their hints declare (tested over every built-in method's
result type in ``tests/test_result_types.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias, TypeVar, Union, get_args, get_origin, get_type_hints

import numpy as np

from fairengine.errors import FairEngineError

JSONValue: TypeAlias = Union[  # noqa: UP007 (a recursive alias needs the string form)
    bool, int, float, str, list["JSONValue"], dict[str, "JSONValue"], None
]
"""Any JSON value (non-finite floats allowed in memory; encoded as strings)."""

JSONObject: TypeAlias = dict[str, JSONValue]
"""A JSON object (``dict[str, JSONValue]``)."""

JSONLike: TypeAlias = Union[  # noqa: UP007
    bool, int, float, str, Sequence["JSONLike"], Mapping[str, "JSONLike"], None
]
"""A value :func:`encode` turns into JSON without loss of meaning: a :data:`JSONValue` built
from any sequences (tuples included) and mappings (read-only views of settings echoed back)."""

T = TypeVar("T")

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class ResultFormatError(FairEngineError):
    """A stored result does not match the type it is read as (the message names the path)."""


def _encode_float(x: float) -> float | str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def encode(value: object) -> JSONValue:
    """Strict-JSON form of ``value`` (module docstring)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return _encode_float(float(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        custom = getattr(value, "to_dict", None)
        if custom is not None and getattr(type(value), "_custom_json", False):
            result: JSONValue = custom()
            return result
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, np.ndarray):
        return encode(value.tolist())
    raise TypeError(f"cannot encode a {type(value).__name__} as a result value: {value!r}")


@functools.cache
def _hints(cls: type) -> dict[str, object]:
    return get_type_hints(cls)


def _fail(path: str, expected: str, data: object) -> ResultFormatError:
    shown = repr(data)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ResultFormatError(f"{path or 'value'}: expected {expected}, found {shown}")


def _type_name(tp: object) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def decode(tp: type[T] | object, data: object, path: str = "") -> T:
    """The value of type ``tp`` that :func:`encode` turned into ``data`` (module docstring)."""
    return typing.cast(T, _decode(tp, data, path))


def _is_json_value(tp: object) -> bool:
    """Whether ``tp`` is :data:`JSONValue`: the alias itself, its name left unresolved inside
    it, or the copy :func:`typing.get_type_hints` makes of it when it resolves a hint that
    contains it (``dict[str, JSONValue] | None``: one level expanded, a new object)."""
    if tp is JSONValue:
        return True
    if isinstance(tp, typing.ForwardRef):
        return tp.__forward_arg__ == "JSONValue"
    args = get_args(tp)
    return (
        get_origin(tp) is Union
        and len(args) == 7
        and args[:4] == (bool, int, float, str)
        and get_origin(args[4]) is list
        and get_origin(args[5]) is dict
        and args[6] is type(None)
    )


def _decode(tp: object, data: object, path: str) -> object:
    if tp is object or _is_json_value(tp):
        return data
    if tp is type(None) or tp is None:
        if data is not None:
            raise _fail(path, "null", data)
        return None
    if tp is bool:
        if not isinstance(data, bool):
            raise _fail(path, "true or false", data)
        return data
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise _fail(path, "an integer", data)
        return data
    if tp is float:
        if isinstance(data, str) and data in _NONFINITE:
            return _NONFINITE[data]
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise _fail(path, "a number", data)
        return float(data)
    if tp is str:
        if not isinstance(data, str):
            raise _fail(path, "a string", data)
        return data
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        if data not in args:
            raise _fail(path, f"one of {list(args)}", data)
        return data
    if origin is Union or origin is types.UnionType:
        if data is None and type(None) in args:
            return None
        errors: list[ResultFormatError] = []
        arms = [a for a in args if a is not type(None)]
        for arm in arms:
            try:
                return _decode(arm, data, path)
            except ResultFormatError as exc:
                errors.append(exc)
        # the error of the arm the value was meant for: the only arm, or the one that got
        # deepest into the value (its error names a path below this one)
        if len(arms) == 1:
            raise errors[0]
        here = path or "value"
        where = [(str(e).split(":", 1)[0], e) for e in errors]
        deeper = [(p, e) for p, e in where if p != here and p.startswith(here)]
        if deeper:
            raise max(deeper, key=lambda pe: len(pe[0]))[1]
        raise _fail(path, " or ".join(_type_name(a) for a in args), data)
    if origin is list:
        if not isinstance(data, list):
            raise _fail(path, "a list", data)
        return [_decode(args[0], v, f"{path}[{i}]") for i, v in enumerate(data)]
    if origin is tuple:
        if not isinstance(data, list):
            raise _fail(path, "a list", data)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{path}[{i}]") for i, v in enumerate(data))
        if len(data) != len(args):
            raise _fail(path, f"a list of {len(args)} values", data)
        return tuple(
            _decode(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, data, strict=True))
        )
    if origin is dict or origin is Mapping:
        if not isinstance(data, dict):
            raise _fail(path, "an object", data)
        return {k: _decode(args[1], v, f"{path}.{k}" if path else k) for k, v in data.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, path)
    raise TypeError(f"{path or 'value'}: type {tp!r} is not one a result may use")


def _decode_dataclass(cls: type, data: object, path: str) -> object:
    custom = getattr(cls, "from_dict", None)
    if custom is not None and getattr(cls, "_custom_json", False):
        if not isinstance(data, dict):
            raise _fail(path, f"an object ({cls.__name__})", data)
        try:
            return custom(data)
        except ResultFormatError as exc:  # a class's own reader: prefix where it was
            if path and not str(exc).startswith(path):
                raise ResultFormatError(f"{path}: {exc}") from exc
            raise
    if not isinstance(data, dict):
        raise _fail(path, f"an object ({cls.__name__})", data)
    hints = _hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ResultFormatError(
            f"{path or cls.__name__}: unknown key(s) {unknown} for {cls.__name__} "
            f"(known: {sorted(known)})"
        )
    kwargs: dict[str, object] = {}
    for name, f in known.items():
        sub = f"{path}.{name}" if path else name
        if name in data:
            kwargs[name] = _decode(hints[name], data[name], sub)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ResultFormatError(f"{sub}: missing (a {cls.__name__} needs it)")
    return cls(**kwargs)
