"""Characterization of :func:`fairengine.permutation.two_group.permutation_test`, bit for bit.

Every statistic kind (the cell-count path, the row path, the AUC with numpy and with torch on the
CPU, custom metrics) is run on small seeded inputs over the metrics, weights, prediction
dtypes, studentizations, schemes and alternatives, and the whole result — the null
distribution, every field, the intervals, ``to_dict()`` and the state a passed-in generator is
left in — is compared with ``np.testing.assert_array_equal`` against
``tests/data/two_group_paths.npz``. Error messages of the contract checks are compared too.

The fixture was recorded from the code before the strategy refactor (commit 6ee3cc2) and
re-recorded once for an intended change of the random draws (the subset masks of the row and
AUC paths draw from other random numbers since commits 9519084 and ecbaa79: exact uniform subsets,
``test_random_subset_masks_are_uniform``; 65 of the 188 cases, the cell-count path, did not
change) by
``tests/data/make_two_group_paths.py`` (``.venv/bin/python tests/data/make_two_group_paths.py``;
numpy 2.4.6, torch 2.13.0+cpu) and checked by running this test on a ``git archive`` of that
commit. Regenerate it only for an intended change of behaviour.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fairengine.permutation import two_group
from fairengine.permutation.two_group import PermutationTestResult, permutation_test

FIXTURE = Path(__file__).parent / "data" / "two_group_paths.npz"

RATES = ("positive_rate", "tpr", "fnr", "fpr", "tnr", "precision", "accuracy")
STUDENTIZE = ("per_permutation", "none", "lift_compat")
SCHEMES = ("all_rows", "within_outcome")


# ----------------------------------------------------------------------------- inputs


def _data(n: int, seed: int, share_a: float = 0.4, kind: str = "random") -> dict[str, np.ndarray]:
    """Labels (int8), hard predictions (int8), probabilities rounded to 0.02 (AUC ties),
    group-A mask and weights, with different base rates and scores in the two groups.

    ``kind="split"`` predicts exactly group A (zero-variance groups: infinite statistics),
    ``kind="constant"`` predicts every row positive (0/0 statistics)."""
    rng = np.random.default_rng(seed)
    g = rng.random(n) < share_a
    y = (rng.random(n) < np.where(g, 0.35, 0.55)).astype(np.int8)
    s = np.clip(rng.beta(2.0, 3.0, n) + np.where(g, 0.2, 0.3) * y, 0.0, 1.0)
    s = np.round(s * 50) / 50
    p = (s > 0.45).astype(np.int8)
    if kind == "split":
        p = g.astype(np.int8)
        s = np.where(g, 0.9, 0.1)
    elif kind == "constant":
        p = np.ones(n, dtype=np.int8)
        s = np.full(n, 0.8)
    w = rng.gamma(2.0, 0.5, n)
    return {"y": y, "p": p, "s": s, "g": g, "w": w}


def mean_score_of_positives(y: np.ndarray, s: np.ndarray, w: np.ndarray | None) -> float:
    """Weighted mean score of the positives (NaN without positives)."""
    pos = y == 1
    if not pos.any():
        return float("nan")
    return float(np.average(s[pos], weights=None if w is None else w[pos]))


def brier(y: np.ndarray, s: np.ndarray, w: np.ndarray | None) -> float:
    return float(np.average((s - y) ** 2, weights=w))


def positives_share(y: np.ndarray, s: np.ndarray, w: np.ndarray | None) -> np.float64:
    """Returns a numpy scalar (converted by the test) and is rarely undefined."""
    return np.float64(np.mean(s > 0.5)) if y.size else np.float64(np.nan)


CUSTOM = {f.__name__: f for f in (mean_score_of_positives, brier, positives_share)}


def _case(
    metric: str,
    *,
    n: int = 300,
    seed: int = 1,
    share_a: float = 0.4,
    pred: str = "hard",
    weights: bool = False,
    probability: bool = False,
    T: int = 99,
    alternative: str = "two-sided",
    studentize: str = "per_permutation",
    scheme: str = "all_rows",
    n_bootstrap: int = 12,
    backend: str = "numpy",
    generator: bool = False,
    chunk: int | None = None,
    level: float = 0.95,
    min_group_size: int = 2,
    data: str = "random",
) -> dict[str, Any]:
    return dict(locals())


def _cases() -> dict[str, dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    # cells: unweighted hard predictions
    for m in RATES:
        for st in STUDENTIZE:
            for sc in SCHEMES:
                cases.append(_case(m, studentize=st, scheme=sc))
    for alt in ("greater", "less"):
        for m in ("positive_rate", "fnr"):
            cases.append(_case(m, alternative=alt))
            cases.append(_case(m, alternative=alt, scheme="within_outcome", studentize="none"))
    for pred in ("bool", "float01", "int64"):
        cases.append(_case("fpr", pred=pred))
    cases.append(_case("recall", seed=2))
    cases.append(_case("specificity", seed=2, scheme="within_outcome"))
    cases.append(_case("positive_rate", generator=True, T=999))
    cases.append(_case("tpr", n=60, share_a=0.1, T=499, level=0.9))  # undefined permutations
    cases.append(_case("precision", n=40, seed=2, share_a=0.15, scheme="within_outcome"))
    cases.append(_case("fnr", n=30, share_a=0.2, studentize="lift_compat"))
    for data in ("split", "constant"):  # infinite and 0/0 statistics
        for st in STUDENTIZE:
            cases.append(_case("positive_rate", n=12, share_a=0.5, data=data, studentize=st))
        cases.append(_case("positive_rate", n=12, share_a=0.5, data=data, weights=True))
        cases.append(_case("accuracy", n=12, share_a=0.5, data=data, alternative="greater"))
        cases.append(_case("brier", n=12, share_a=0.5, data=data, T=19, probability=True))
    # rows: weights, expected counts, calibration
    for m in (*RATES, "calibration"):
        for st in STUDENTIZE:
            for sc in SCHEMES:
                cases.append(_case(m, weights=True, studentize=st, scheme=sc))
        cases.append(_case(m, pred="soft"))
        cases.append(_case(m, pred="soft", weights=True, scheme="within_outcome"))
    cases.append(_case("calibration", probability=True))
    cases.append(_case("calibration", probability=True, weights=True, alternative="less"))
    cases.append(_case("fnr", weights=True, alternative="greater", chunk=3_000))
    cases.append(_case("accuracy", pred="soft", chunk=3_000, scheme="within_outcome"))
    cases.append(_case("tpr", pred="soft", n=50, share_a=0.1, T=299))  # undefined permutations
    cases.append(_case("positive_rate", weights=True, generator=True))
    # AUC: numpy and torch on the CPU
    for st in STUDENTIZE:
        for sc in SCHEMES:
            cases.append(_case("auc", probability=True, studentize=st, scheme=sc))
            cases.append(_case("auc", probability=True, studentize=st, scheme=sc, backend="torch"))
    for alt in ("greater", "less"):
        cases.append(_case("auc", probability=True, alternative=alt, seed=3))
    cases.append(_case("auc", pred="soft"))  # the prediction is the score
    cases.append(_case("auc", probability=True, chunk=3_000, n=400))
    cases.append(
        _case("auc", probability=True, chunk=3_000, backend="torch", scheme="within_outcome")
    )
    cases.append(_case("auc", probability=True, generator=True))
    cases.append(_case("auc", probability=True, generator=True, backend="torch"))
    for seed in (1, 2):  # seed 1: NaN observed statistic
        cases.append(_case("auc", probability=True, n=40, seed=seed, share_a=0.3, T=299))
    # custom metrics
    for name in CUSTOM:
        for st in STUDENTIZE:
            for sc in SCHEMES:
                cases.append(_case(name, n=80, T=29, probability=True, studentize=st, scheme=sc))
        cases.append(_case(name, n=80, T=29, probability=True, weights=True))
        cases.append(
            _case(name, n=80, T=29, weights=True, studentize="lift_compat", alternative="less")
        )
    cases.append(_case("brier", n=60, T=19, pred="hard", generator=True, chunk=600))
    cases.append(_case("mean_score_of_positives", n=30, share_a=0.2, T=49, probability=True))
    out: dict[str, dict[str, Any]] = {}
    for c in cases:
        key = "|".join(f"{k}={v}" for k, v in c.items())
        assert key not in out, key
        out[key] = c
    return out


CASES = _cases()


@contextmanager
def _chunk(elements: int | None) -> Iterator[None]:
    old = two_group.CHUNK_ELEMENTS
    if elements is not None:
        two_group.CHUNK_ELEMENTS = elements
    try:
        yield
    finally:
        two_group.CHUNK_ELEMENTS = old


def _call(c: dict[str, Any]) -> tuple[PermutationTestResult, np.random.Generator | None]:
    d = _data(c["n"], c["seed"], c["share_a"], c["data"])
    pred = {
        "hard": d["p"],
        "bool": d["p"].astype(bool),
        "float01": d["p"].astype(np.float64),
        "int64": d["p"].astype(np.int64),
        "soft": d["s"],
    }[c["pred"]]
    rng = np.random.default_rng(c["seed"] + 100) if c["generator"] else None
    metric = CUSTOM.get(c["metric"], c["metric"])
    with _chunk(c["chunk"]):
        res = permutation_test(
            d["y"],
            pred,
            d["g"],
            metric=metric,
            probability=d["s"] if c["probability"] else None,
            weights=d["w"] if c["weights"] else None,
            n_permutations=c["T"],
            alternative=c["alternative"],
            studentize=c["studentize"],
            scheme=c["scheme"],
            confidence_level=c["level"],
            n_bootstrap=c["n_bootstrap"],
            min_group_size=c["min_group_size"],
            seed=rng if rng is not None else c["seed"] + 7,
            backend=c["backend"],
            device="cpu" if c["backend"] == "torch" else None,
            group_names=("a", "b"),
        )
    return res, rng


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def summarize(c: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every observable of one case: ``null`` (float64), ``summary`` (JSON of the fields,
    their types, the intervals and ``to_dict()``), ``rng_after`` (next draws of a passed-in
    generator, empty otherwise)."""
    res, rng = _call(c)
    fields = {k: v for k, v in vars(res).items() if k != "null_distribution"}
    ci = res.confidence_interval()
    ci90 = res.confidence_interval(0.9)
    summary = {
        "fields": fields,
        "types": {k: type(v).__name__ for k, v in vars(res).items()},
        "null_dtype": str(res.null_distribution.dtype),
        "ci": [ci.low, ci.high, ci.level, ci.method],
        "ci90": [ci90.low, ci90.high, ci90.level, ci90.method],
        "pvalue_interval": list(res.pvalue_interval()),
        "pvalue_interval_99": list(res.pvalue_interval(0.99)),
        "pvalue_se": res.pvalue_se,
        "decision": [res.decision(0.05), res.decision(0.5)],
        "to_dict": res.to_dict(histogram_bins=7),
    }
    text = json.dumps(summary, sort_keys=True, default=_jsonable)
    after = rng.integers(0, 2**62, size=4) if rng is not None else np.zeros(0, np.int64)
    return {
        "null": np.asarray(res.null_distribution),
        "summary": np.frombuffer(text.encode(), dtype=np.uint8),
        "rng_after": after,
    }


# ----------------------------------------------------------------------------- errors


def _raises_custom(y: np.ndarray, s: np.ndarray, w: np.ndarray | None) -> float:
    raise ZeroDivisionError("boom")


def _returns_text(y: np.ndarray, s: np.ndarray, w: np.ndarray | None) -> Any:
    return "high"


def _undefined_in_a(y: np.ndarray, s: np.ndarray, w: np.ndarray | None) -> float:
    return float("nan") if y.size < 150 else 0.5


def _error_calls() -> dict[str, Any]:
    d = _data(300, 4)
    y, p, s, g, w = d["y"], d["p"], d["s"], d["g"], d["w"]
    no_pos_a = y.copy()
    no_pos_a[g] = 0
    one_class = y.copy()
    one_class[~g] = 1
    kw: dict[str, Any] = {"n_permutations": 9, "group_names": ("a", "b")}
    return {
        "fnr_cells_no_positives": lambda: permutation_test(no_pos_a, p, g, metric="fnr", **kw),
        "fnr_rows_no_positives": lambda: permutation_test(
            no_pos_a, p, g, metric="fnr", weights=w, **kw
        ),
        "precision_rows_undefined": lambda: permutation_test(
            y, np.zeros_like(s), g, metric="precision", weights=w, **kw
        ),
        "auc_weights": lambda: permutation_test(y, s, g, metric="auc", weights=w, **kw),
        "auc_one_class": lambda: permutation_test(one_class, s, g, metric="auc", **kw),
        "custom_raises": lambda: permutation_test(y, s, g, metric=_raises_custom, **kw),
        "custom_text": lambda: permutation_test(y, s, g, metric=_returns_text, **kw),
        "custom_undefined": lambda: permutation_test(y, s, g, metric=_undefined_in_a, **kw),
        "min_group": lambda: permutation_test(y, p, g, min_group_size=250, **kw),
        "bad_alternative": lambda: permutation_test(y, p, g, alternative="up", **kw),
        "bad_studentize": lambda: permutation_test(y, p, g, studentize="t", **kw),
        "bad_scheme": lambda: permutation_test(y, p, g, scheme="x", **kw),
        "bad_backend": lambda: permutation_test(y, p, g, backend="jax", **kw),
        "bad_level": lambda: permutation_test(y, p, g, confidence_level=1.0, **kw),
        "bad_bootstrap": lambda: permutation_test(y, p, g, n_bootstrap=1, **kw),
        "bad_T_zero": lambda: permutation_test(y, p, g, n_permutations=0),
        "bad_T_float": lambda: permutation_test(y, p, g, n_permutations=9.0),
        "bad_T_bool": lambda: permutation_test(y, p, g, n_permutations=True),
        "bad_metric": lambda: permutation_test(y, p, g, metric="f1", **kw),
        "bad_y": lambda: permutation_test(y + 1, p, g, **kw),
        "bad_prediction": lambda: permutation_test(y, s + 1, g, **kw),
        "bad_prediction_text": lambda: permutation_test(y, np.array(["x"] * 300), g, **kw),
        "bad_group": lambda: permutation_test(y, p, g.astype(int) * 2, **kw),
        "bad_probability": lambda: permutation_test(y, p, g, probability=s[:5], **kw),
        "bad_weights": lambda: permutation_test(y, p, g, weights=-w, **kw),
    }


ERRORS = _error_calls()


def error_text(name: str) -> str:
    try:
        ERRORS[name]()
    except Exception as exc:  # the type and message are the observable
        return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    return "no error"


# ----------------------------------------------------------------------------- tests


def pack() -> dict[str, np.ndarray]:
    """Run every case and error call; the fixture's arrays (few entries, short names):
    ``keys`` and ``errors`` as UTF-8 JSON, the null distributions concatenated in ``nulls``
    with their ``sizes``, the summaries as one UTF-8 JSON list, ``rng_after`` (cases, 4)."""
    runs = [summarize(c) for c in CASES.values()]
    blob = [r["summary"].tobytes().decode() for r in runs]
    return {
        "keys": _utf8(json.dumps(list(CASES))),
        "nulls": np.concatenate([r["null"] for r in runs]),
        "sizes": np.array([r["null"].size for r in runs], dtype=np.int64),
        "summaries": _utf8(json.dumps(blob)),
        "rng_after": np.stack(
            [r["rng_after"] if r["rng_after"].size else np.full(4, -1) for r in runs]
        ),
        "errors": _utf8(json.dumps({name: error_text(name) for name in ERRORS})),
    }


def _utf8(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8)


def unpack(f: Any) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, str]]:
    """The fixture's arrays back as {case key: summarize()-shaped dict} and the error texts."""
    keys = json.loads(f["keys"].tobytes())
    blob = json.loads(f["summaries"].tobytes())
    nulls = np.split(f["nulls"], np.cumsum(f["sizes"])[:-1])
    cases = {}
    for i, key in enumerate(keys):
        after = f["rng_after"][i]
        cases[key] = {
            "null": nulls[i],
            "summary": _utf8(blob[i]),
            "rng_after": after if after[0] >= 0 else np.zeros(0, np.int64),
        }
    return cases, json.loads(f["errors"].tobytes())


@pytest.fixture(scope="module")
def recorded() -> tuple[dict[str, dict[str, np.ndarray]], dict[str, str]]:
    with np.load(FIXTURE) as f:
        return unpack(f)


Recorded = tuple[dict[str, dict[str, np.ndarray]], dict[str, str]]


def test_fixture_covers_every_case(recorded: Recorded) -> None:
    assert list(recorded[0]) == list(CASES)
    assert list(recorded[1]) == list(ERRORS)


def _compare(got: Any, want: Any, where: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), where
        for k in want:
            _compare(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            _compare(a, b, f"{where}[{i}]")
    else:
        assert type(got) is type(want), where
        if isinstance(want, float) and math.isnan(want):
            assert math.isnan(got), where
        else:
            assert got == want, where


@pytest.mark.parametrize("key", list(CASES))
def test_result_is_unchanged(key: str, recorded: Recorded) -> None:
    got, want = summarize(CASES[key]), recorded[0][key]
    np.testing.assert_array_equal(got["null"], want["null"], strict=True)
    np.testing.assert_array_equal(got["rng_after"], want["rng_after"], strict=True)
    _compare(json.loads(got["summary"].tobytes()), json.loads(want["summary"].tobytes()), "result")
    np.testing.assert_array_equal(got["summary"], want["summary"], strict=True)


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_is_unchanged(name: str, recorded: Recorded) -> None:
    np.testing.assert_array_equal(np.array(error_text(name)), np.array(recorded[1][name]))


def test_paths_are_all_covered() -> None:
    """Every statistic kind appears among the cases (guards the case list itself)."""
    paths = {json.loads(summarize(c)["summary"].tobytes())["fields"]["path"] for c in _sample()}
    assert paths == {"cells", "rows", "auc-numpy", "auc-torch-cpu", "custom"}


def _sample() -> list[dict[str, Any]]:
    seen: dict[tuple[str, str, bool, bool], dict[str, Any]] = {}
    for c in CASES.values():
        kind = c["metric"] if c["metric"] in ("auc", *CUSTOM) else "rate"
        seen.setdefault((kind, c["backend"], c["weights"], c["pred"] == "soft"), c)
    return list(seen.values())
