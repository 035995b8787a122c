"""Finding keys (fairengine.finding_keys): injective tokens, injective pair and intersection
joins, MLflow-valid names, and the per-audit uniqueness invariant, checked exhaustively over
tricky names and end to end through four methods, finalize_audit and a real MLflow store."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.utils.validation import MAX_ENTITY_KEY_LENGTH, _validate_metric_name

from fairengine.audit_context import DatasetSummary, ModelIdentity
from fairengine.dataset import AuditDataset
from fairengine.finding_keys import (
    FLAT_SUFFIXES,
    MAX_METRIC_NAME_LENGTH,
    MAX_TOKEN_LENGTH,
    FindingKeyError,
    check_unique_keys,
    intersection_token,
    key_token,
    metric_name_problem,
    pair_token,
    part_token,
)
from fairengine.fliptest.method import map_artifact_name
from fairengine.group_metrics import GroupMetricsConfig, run_group_metrics
from fairengine.group_parity import group_parity, metric_token
from fairengine.intersectional.config import IntersectionalConfig
from fairengine.intersectional.method import run_intersectional
from fairengine.permutation.config import PermutationConfig
from fairengine.permutation.method import run_permutation_tests
from fairengine.results import AuditResult, Finding, Interval, MethodResult, Verdict
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit

LONG = "a" * (MAX_TOKEN_LENGTH + 1)
TRICKY = [
    "白人", "🙂", "Ünïcödé", "Unicode", "Female", "female", "Female ", " female", "FEMALE",
    "female\t", "<30", "30", ">30", "30+", "a_b", "c", "a", "b_c", "a__b", "_a", "a_", "",
    " ", "_", "-", "--", ".", "..", "/", "a.b", "a/b", "a:b", "a b", "a-b", "pvalue",
    "ci_low", "verdict_fail", "x0000abcd", "x" + "0" * 8, "1", "-1", "1.0", "True", "nan",
    "\x00", "a\u0301", "\u00e1", "African-American", "25-45", "Native American",
    "Asian-Pac-Islander", "a" * MAX_TOKEN_LENGTH, LONG, LONG + "b", "é" * 300, "a_" * 30 + "a",
]
# names that look like what a lossy name turns into
LOOKALIKES = [key_token(n) for n in TRICKY] + [key_token(key_token(n)) for n in TRICKY]
ALPHABET = ["a", "B", "_", "-", "x", "0", ".", " ", "<", "白"]
SHORT = ["".join(t) for k in range(4) for t in itertools.product(ALPHABET, repeat=k)]
CORPUS = list(dict.fromkeys(TRICKY + LOOKALIKES + SHORT))
# a token: words of [A-Za-z0-9-] joined by "__", no single "_", no ".", never empty
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9-]+(?:__[A-Za-z0-9-]+)*")


def old_metric_token(value: str) -> str:
    """The scheme before issue 16 (kept here to show the property test catches it)."""
    token = re.sub(r"[^0-9A-Za-z_\-]+", "_", str(value)).strip("_")
    return token or "_"


def collisions(token: Callable[[str], str], names: list[str]) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for n in names:
        seen.setdefault(token(n), []).append(n)
    return {t: ns for t, ns in seen.items() if len(ns) > 1}


def mlflow_accepts(name: str) -> bool:
    try:
        _validate_metric_name(name)
    except MlflowException:
        return False
    return len(name) <= MAX_ENTITY_KEY_LENGTH


def test_corpus_is_large_and_the_old_scheme_collides_on_it() -> None:
    assert len(CORPUS) > 1100
    old = collisions(old_metric_token, CORPUS)
    assert old[old_metric_token("白人")] and "🙂" in old[old_metric_token("白人")]
    assert "Female " in old["Female"] and " female" in old["female"]
    assert old_metric_token("<30") == old_metric_token("30")
    assert f"{old_metric_token('a_b')}_c" == f"a_{old_metric_token('b_c')}"


def test_token_is_injective_and_well_shaped_on_every_tricky_name() -> None:
    assert collisions(key_token, CORPUS) == {}
    for n in CORPUS:
        t = key_token(n)
        assert TOKEN_SHAPE.fullmatch(t), (n, t)
        assert len(t) <= MAX_TOKEN_LENGTH, (n, t)
        assert t not in FLAT_SUFFIXES
    assert metric_token("白人") == key_token("白人")  # parity's name is an alias


@pytest.mark.parametrize(
    "name", ["female", "Female", "male", "African-American", "25-45", "-1", "Asian-Pac-Islander"]
)
def test_plain_ascii_names_keep_their_old_tokens(name: str) -> None:
    assert key_token(name) == old_metric_token(name) == name


def test_lossy_names_read_as_a_slug_plus_a_hash() -> None:
    assert re.fullmatch(r"Unicode-x[0-9a-f]{8}", key_token("Ünïcödé"))
    assert re.fullmatch(r"Female-x[0-9a-f]{8}", key_token("Female "))
    assert re.fullmatch(r"30-x[0-9a-f]{8}", key_token("<30"))
    assert re.fullmatch(r"x[0-9a-f]{8}", key_token("白人"))
    assert key_token("age_group") == "age__group"
    # a readable name that looks hashed is hashed itself, so the two can never meet
    looks = key_token("白人")
    assert key_token(looks) != looks and key_token(looks).startswith(looks + "-x")
    assert key_token(LONG).startswith("a" * 20) and key_token(LONG) != key_token(LONG + "b")


def test_part_tokens_keep_underscores_and_are_injective() -> None:
    assert part_token("positive_rate") == "positive_rate" and part_token("auc") == "auc"
    assert collisions(part_token, CORPUS) == {}
    for n in CORPUS:
        t = part_token(n)
        assert re.fullmatch(r"[A-Za-z0-9_-]+", t) and len(t) <= MAX_TOKEN_LENGTH, (n, t)


def test_pairs_are_injective_including_underscores_inside_names() -> None:
    assert pair_token("a_b", "c") != pair_token("a", "b_c")
    names = [n for n in CORPUS if len(n) <= 2][:400] + TRICKY
    names = list(dict.fromkeys(names))
    pairs = {}
    for a, b in itertools.product(names, repeat=2):
        pairs.setdefault(pair_token(a, b), []).append((a, b))
    assert len(pairs) == len(names) ** 2
    # and the join decodes: the separator is the only run of exactly one "_"
    for a, b in [("a_b", "c"), ("a", "b_c"), ("x_", "_y"), ("白人", "a__b")]:
        assert re.split(r"(?<!_)_(?!_)", pair_token(a, b)) == [key_token(a), key_token(b)]


def test_intersections_are_injective_and_bounded() -> None:
    names = ["a", "a_x", "x", "x_b", "b", "a_x_b", "白人", "", LONG, "é" * 300]
    seqs = [s for k in (1, 2, 3) for s in itertools.product(names, repeat=k)]
    tokens = {}
    for s in seqs:
        tokens.setdefault(intersection_token(s), []).append(s)
    assert len(tokens) == len(seqs)
    assert intersection_token(["sex", "race"]) == "sex_x_race"
    long = intersection_token([LONG] * 6)
    assert len(long) <= 100 and long != intersection_token([LONG] * 7)


def test_fliptest_map_file_names_are_injective() -> None:
    names = ["a_b", "c", "a", "b_c", "白人", "🙂", "to", "label", "x"]
    files = {
        map_artifact_name(*args)
        for args in itertools.product(names[:4], names, names, [None, "0", "1"])
    }
    assert len(files) == 4 * len(names) ** 2 * 3


def test_metric_name_problem_agrees_with_mlflow() -> None:
    names = [
        "dp_gap.sex.female_male", "a b", "a/b", "a//b", "a/", "/a", "../a", "a/../b", ".", "..",
        "./a", "a:b", "é", "🙂", "a<b", "a\tb", "", "x" * 250, "x" * 251, "a.b.c", "-a", "a-",
    ]
    for n in names:  # ours is MLflow's rule on every OS: ":" is refused (Windows refuses it)
        assert (metric_name_problem(n) is None) == (mlflow_accepts(n) and ":" not in n), n


def finding(key: str, label: str = "", p: float | None = None) -> Finding:
    return Finding(key, label or key, 0.1, Interval(0.0, 0.2), pvalue=p)


def test_check_unique_keys_lists_duplicates_with_labels() -> None:
    check_unique_keys([finding("dp_gap.s.a_b"), finding("dp_gap.s.a_c")])
    with pytest.raises(FindingKeyError, match=r"'dp_gap\.s\.a_b' from 'gap one'.*'gap two'"):
        check_unique_keys([finding("dp_gap.s.a_b", "gap one"), finding("dp_gap.s.a_b", "gap two")])
    with pytest.raises(FindingKeyError, match=r"'k\.pvalue'"):
        check_unique_keys([finding("k"), finding("k.pvalue")])  # a suffix meets a key
    with pytest.raises(FindingKeyError, match=r"invalid.*'a<b'"):
        check_unique_keys([finding("a<b")])
    with pytest.raises(FindingKeyError, match="reserved"):
        check_unique_keys([finding("verdict_fail")])
    method = MethodResult("m", "M", findings=[finding("k", "one"), finding("k", "two")])
    with pytest.raises(FindingKeyError, match="internal error"):
        finalize_audit(config={}, dataset={}, model={}, validation=None, methods=[method])


def test_flat_metrics_raise_instead_of_overwriting() -> None:
    method = MethodResult("m", "M", findings=[finding("k", "one", 0.5), finding("k.pvalue", "t")])
    result = AuditResult(
        audit_id="x", created_at="", config={}, dataset=DatasetSummary(), model=ModelIdentity(),
        validation=None,
        methods=[method], alpha=0.05, multiplicity="holm", verdict=Verdict("pass", ""),
    )
    with pytest.raises(FindingKeyError, match=r"'k\.pvalue' is produced by both 'one' and 't'"):
        result.flat_metrics()


SEX = ["白人", "🙂", "Female", "female", "Female "]
BAND = ["a_b", "c", "a", "b_c", "<30", "30", "band " + "long " * 20]
ATTR2 = "Age band (years) — " + "very long name " * 4


@pytest.fixture(scope="module")
def tricky_audit() -> AuditResult:
    rng = np.random.default_rng(16)
    n = 5000
    frame = pd.DataFrame(
        {
            "性别": rng.choice(SEX, n),
            ATTR2: rng.choice(BAND, n),
            "p": 1 / (1 + np.exp(-rng.normal(size=n))),
        }
    )
    frame["y"] = (rng.random(n) < frame["p"]).astype(int)
    ds = AuditDataset.from_frame(
        frame, ColumnRoles("y", ("性别", ATTR2), score="p", features=()), threshold=0.5
    )
    assert ds.groups["性别"].categories == tuple(sorted(SEX))  # the contract keeps them apart
    methods = [
        group_parity(ds, tolerance=0.0),
        run_group_metrics(ds, GroupMetricsConfig(auc_gap_tests=True)),
        run_intersectional(ds, IntersectionalConfig(n_bootstrap=50, n_posterior=50), seed=0),
        run_permutation_tests(
            ds,
            PermutationConfig(metrics=["positive_rate", "auc"], n_permutations=99, n_bootstrap=10),
            seed=0,
        ),
    ]
    assert [m.status for m in methods] == ["ok"] * 4, [m.reason for m in methods]
    return finalize_audit(
        config={}, dataset=ds.summary(), model={}, validation=None, methods=methods
    )


def test_tricky_group_names_give_unique_valid_keys_end_to_end(tricky_audit: AuditResult) -> None:
    keys = [f.key for f in tricky_audit.findings()]
    assert len(keys) > 200 and len(set(keys)) == len(keys)
    pairs = len(SEX) * (len(SEX) - 1) // 2 + len(BAND) * (len(BAND) - 1) // 2
    assert sum(k.startswith("dp_gap.") for k in keys) == pairs
    assert sum(k.startswith("perm_auc.") for k in keys) == pairs
    assert f"dp_gap.{key_token('性别')}.Female_female" in keys
    assert f"perm_positive_rate.{key_token('性别')}.Female_female" in keys
    flat = tricky_audit.flat_metrics()
    values = [
        v
        for f in tricky_audit.findings()
        for v in (
            f.estimate,
            *((f.interval.low, f.interval.high) if f.interval else ()),
            f.pvalue,
            f.adjusted_pvalue,
        )
    ]
    assert len(flat) == sum(v is not None and math.isfinite(v) for v in values)
    for name in flat:
        assert mlflow_accepts(name), name
    assert max(map(len, flat)) <= MAX_METRIC_NAME_LENGTH


def test_every_flat_metric_survives_a_real_mlflow_store(
    tricky_audit: AuditResult, tmp_path: Path
) -> None:
    from mlflow import MlflowClient

    from tasks.mlflow_log import log_audit

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    info = log_audit(
        tricky_audit, "<html></html>", tracking_uri=uri, experiment="keys",
        tag_model_version=False,
    )
    logged = MlflowClient(tracking_uri=uri).get_run(info["run_id"]).data.metrics
    flat = tricky_audit.flat_metrics()
    # + verdict_fail and the counts: tests_rejected, tests_not_rejected, tests_undetermined
    assert len(logged) == len(flat) + 4
    assert logged["tests_not_rejected"] == tricky_audit.decisions.n_not_rejected
    assert tricky_audit.decisions is not None
    assert logged["tests_undetermined"] == tricky_audit.decisions.n_undetermined
    assert {k: logged[k] for k in flat} == flat
