"""fairengine.ranking.findings: the keys of every ranking finding (fairengine.finding_keys
format, unique and MLflow-valid also for awkward attribute and group names), the tested ones
with their permutation counts, questions and null hypotheses, and the JSON round trip."""

from __future__ import annotations

import json

import numpy as np

from fairengine.finding_keys import check_unique_keys
from fairengine.ranking import group_exposure, ranking_findings, ranking_statistics
from fairengine.results import Finding, gap_question


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    n = 240
    lists = rng.integers(0, 4, n)
    codes = rng.integers(0, 3, n)
    codes[:3] = [0, 1, 2]
    scores = rng.normal(size=n) + 0.3 * (codes == 0)
    relevance = rng.integers(0, 2, n)
    return scores, codes, lists, relevance


def test_keys_of_every_finding() -> None:
    s, g, lists, rel = _data()
    res = ranking_statistics(
        s, g, ["F", "M", "X"], lists=lists, relevance=rel, n_permutations=49, attribute="sex"
    )
    findings = res.findings()
    keys = [f.key for f in findings]
    check_unique_keys(findings)
    expected = set()
    for grp in ("F", "M", "X"):
        expected |= {
            f"rank_group_exposure.sex.{grp}",
            f"rank_group_exposure_per_relevance.sex.{grp}",
        }
        for tok in ("10pct", "20pct"):
            expected |= {
                f"rank_topk_share_{tok}.sex.{grp}",
                f"rank_skew_{tok}.sex.{grp}",
                f"rank_precision_{tok}.sex.{grp}",
                f"rank_recall_{tok}.sex.{grp}",
            }
    for pair in ("F_M", "F_X", "M_X"):
        expected |= {
            f"rank_exposure.sex.{pair}",
            f"rank_exposure_ratio.sex.{pair}",
            f"rank_dtr.sex.{pair}",
            f"rank_topk_rate_10pct.sex.{pair}",
            f"rank_topk_rate_20pct.sex.{pair}",
        }
    for tok in ("10pct", "20pct"):
        expected |= {f"rank_minskew_{tok}.sex", f"rank_maxskew_{tok}.sex"}
    expected.add("rank_ndkl.sex")
    assert set(keys) == expected and len(keys) == len(expected)
    tested = [f for f in findings if f.tested]
    assert {f.key.split(".")[0] for f in tested} == {
        "rank_exposure",
        "rank_topk_rate_10pct",
        "rank_topk_rate_20pct",
    }
    for f in tested:
        assert f.null_kind == "zero" and f.null_hypothesis and f.interval is not None
        (part,) = f.resampling
        assert part.name == "permutation" and part.resamples == 49
        assert f.pvalue == (1 + part.exceedances) / 50
        assert f.question == gap_question(
            f.key.split(".")[0], "sex", *f.key.split(".")[2].split("_")
        )
    for f in findings:
        assert f.reading and f.label
        assert Finding.from_dict(json.loads(json.dumps(f.to_dict(), allow_nan=False))) == f


def test_awkward_names_give_valid_unique_keys() -> None:
    s, g, lists, _ = _data(1)
    res = ranking_statistics(
        s,
        g,
        ["白人", "a_b", "Female "],
        lists=lists,
        k=(3, 0.125),
        n_permutations=9,
        attribute="age_group",
    )
    findings = res.findings()
    check_unique_keys(findings)
    keys = [f.key for f in findings]
    assert "rank_topk_share_k3.age_group.a__b" in keys
    assert "rank_skew_12p5pct.age_group.a__b" in keys


def test_exposure_difference_untested_without_pair_tests() -> None:
    s, g, lists, _ = _data(2)
    e = group_exposure(s, g, ["a", "b", "c"], lists=lists, attribute="x")
    findings = ranking_findings(exposure=e)
    diff = next(f for f in findings if f.key == "rank_exposure.x.a_b")
    assert not diff.tested
    assert diff.estimate == e.pair("a", "b").difference
    assert not any(f.key.startswith("rank_dtr") for f in findings)  # no relevance
