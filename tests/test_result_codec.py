"""The typed-result JSON codec (fairengine.result_codec): lossless round trips, errors that name
the path, and the audit.json formats it reads."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pytest

from fairengine.result_codec import ResultFormatError, decode, encode
from fairengine.results import (
    MethodDetails,
    MethodResult,
    NoDetails,
    UnknownDetails,
    register_details,
)


@dataclass(frozen=True)
class Rate:
    estimate: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Group:
    group: str
    n: int
    rates: dict[str, Rate]
    flags: tuple[bool, ...] = ()


@dataclass(frozen=True)
class Other:
    x: int


@dataclass(frozen=True)
class ToyDetails(MethodDetails):
    kind: Literal["a", "b"]
    groups: tuple[Group, ...]
    pair: tuple[str, str]
    counts: list[int] = field(default_factory=list)
    note: str | None = None
    threshold: float | str = 0.5
    best: Group | Other | None = None


def toy() -> ToyDetails:
    return ToyDetails(
        kind="b",
        groups=(
            Group("fémale", 3, {"tpr": Rate(0.5, 0.1, 0.9)}, (True, False)),
            Group("male", 0, {"tpr": Rate(math.nan), "fpr": Rate(math.inf, -math.inf, None)}),
        ),
        pair=("fémale", "male"),
        counts=[1, 2, 3],
        threshold="expected",
    )


def test_round_trip_is_lossless_through_strict_json() -> None:
    d = toy()
    text = json.dumps(encode(d), allow_nan=False, ensure_ascii=False)
    back = decode(ToyDetails, json.loads(text))
    assert back.groups[0] == d.groups[0] and back.pair == d.pair and back.kind == "b"
    assert math.isnan(back.groups[1].rates["tpr"].estimate)  # NaN != NaN: compare by parts
    assert back.groups[1].rates["fpr"] == Rate(math.inf, -math.inf, None)
    assert back.threshold == "expected" and back.counts == [1, 2, 3]
    assert encode(back) == encode(d)


def test_numpy_values_encode_as_python_values() -> None:
    out = encode(Rate(np.float32(0.25), np.float64(np.nan), None))
    assert out == {"estimate": 0.25, "low": "NaN", "high": None}
    assert encode({"a": np.arange(3), "b": np.bool_(True)}) == {"a": [0, 1, 2], "b": True}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["groups"][1].update(n=1.5), r"groups\[1\]\.n: expected an integer"),
        (
            lambda d: d["groups"][0]["rates"]["tpr"].pop("estimate"),
            r"rates\.tpr\.estimate: missing",
        ),
        (lambda d: d.update(kind="c"), r"kind: expected one of \['a', 'b'\]"),
        (lambda d: d.update(extra=1), r"unknown key\(s\) \['extra'\]"),
        (lambda d: d.update(pair=["x"]), r"pair: expected a list of 2 values"),
        (lambda d: d["groups"][0].update(flags=[1]), r"flags\[0\]: expected true or false"),
        (lambda d: d.update(note=3), r"note: expected a string"),
        (lambda d: d.update(threshold=[1]), r"threshold: expected float or str"),
    ],
)
def test_a_value_that_does_not_fit_names_its_path(mutate, message) -> None:
    data = json.loads(json.dumps(encode(toy()), allow_nan=False))
    mutate(data)
    with pytest.raises(ResultFormatError, match=message):
        decode(ToyDetails, data, "details")


def test_an_error_inside_a_union_arm_names_the_inner_path() -> None:
    data = json.loads(json.dumps(encode(toy()), allow_nan=False))
    data["best"] = {"group": "a", "n": 1, "rates": {"tpr": {"low": 0.1}}}
    with pytest.raises(ResultFormatError, match=r"best\.rates\.tpr\.estimate: missing"):
        decode(ToyDetails, data, "details")
    data["best"] = {"x": 2}
    assert decode(ToyDetails, data).best == Other(2)


def test_method_result_reads_its_registered_details_type() -> None:
    register_details("toy_codec", ToyDetails)
    r = MethodResult("toy_codec", "Toy", details=toy())
    back = MethodResult.from_dict(json.loads(json.dumps(r.to_dict(), allow_nan=False)))
    assert isinstance(back.details, ToyDetails) and back.to_dict() == r.to_dict()
    # the current format is strict: details that do not fit are an error naming the method
    bad = r.to_dict()
    bad["details"]["kind"] = "z"
    with pytest.raises(ResultFormatError, match=r"method 'toy_codec': details\.kind: expected"):
        MethodResult.from_dict(bad)
    # older formats keep them verbatim, saying why
    old = MethodResult.from_dict(bad, strict=False)
    assert isinstance(old.details, UnknownDetails) and "older format" in old.details.note
    assert old.to_dict()["details"] == bad["details"]


def test_unknown_methods_and_methods_that_did_not_run() -> None:
    plugin = MethodResult.from_dict({"method": "not_imported", "details": {"x": [1, "NaN"]}})
    assert isinstance(plugin.details, UnknownDetails)
    assert plugin.to_dict()["details"] == {"x": [1, "NaN"]}
    skipped = MethodResult.from_dict(
        {"method": "toy_codec", "status": "not_run", "details": {}, "reason": "off"}
    )
    assert isinstance(skipped.details, NoDetails) and skipped.to_dict()["details"] == {}
