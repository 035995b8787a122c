"""The JSON round trip shared by the result types of the regression, multiclass and ranking
statistics.

Every result of :mod:`fairengine.regression`, :mod:`fairengine.multiclass` and
:mod:`fairengine.ranking` is a frozen dataclass whose sequences are tuples;
:class:`JsonResult` gives it ``to_dict``/``from_dict`` through the project's typed codec
(:mod:`fairengine.result_codec`): non-finite floats become ``"NaN"``, ``"Infinity"`` and
``"-Infinity"`` exactly as :func:`fairengine.results.encode_float` writes them, and reading back
checks every field against its type hint, so ``type(x).from_dict(x.to_dict()) == x``.
"""

from __future__ import annotations

from typing import Self

from fairengine.result_codec import JSONValue, decode, encode


class JsonResult:
    """Mixin: lossless strict-JSON ``to_dict`` and type-checked ``from_dict``."""

    def to_dict(self) -> dict[str, JSONValue]:
        out = encode(self)
        assert isinstance(out, dict)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, JSONValue]) -> Self:
        result: Self = decode(cls, d, cls.__name__)
        return result
