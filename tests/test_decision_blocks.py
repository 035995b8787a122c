"""``multiplicity: maxt``: the block step-down of :func:`fairengine.decisions.block_adjusted`
(Holm across the family, Westfall–Young maxT inside joint permutation blocks) and its wiring
through the permutation method and the audit.

Checked: closed forms (singletons = Holm; one block = monotone maxT), equality with a
brute-force run of the step-down at every level, the joint evidence the permutation method
records, the family-wise error of whole audits under the complete null (Monte-Carlo error
stated), and that maxT rejects at least what Holm rejects in a dependent scenario.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from fairengine.dataset import AuditDataset
from fairengine.decisions import FamilyTest, ResamplingSettings, block_adjusted, decide_family
from fairengine.group_parity import group_parity
from fairengine.multiplicity import adjust_pvalues
from fairengine.permutation import PermutationConfig, run_permutation_tests
from fairengine.permutation.joint import floored_statistic
from fairengine.permutation.method import PermutationResampler
from fairengine.permutation.metrics import studentized_difference
from fairengine.results import AuditResult, ResamplingPart
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit


def brute_stepdown(q: np.ndarray, blocks: np.ndarray, ranks: np.ndarray, alpha: float):
    """The procedure at level ``alpha``, literally: reject each remaining block's next test when
    q ≤ α |B_k| / Σ_{blocks with tests left} |B_l|, until nothing more is rejected."""
    rejected = np.zeros(q.size, dtype=bool)
    size = {k: int(np.sum(blocks == k)) for k in np.unique(blocks)}
    while True:
        left: dict[int, list[int]] = {}
        for i in np.lexsort((np.arange(q.size), ranks)):
            if not rejected[i]:
                left.setdefault(int(blocks[i]), []).append(int(i))
        total = sum(size[k] for k in left)
        new = [v[0] for k, v in left.items() if q[v[0]] <= alpha * size[k] / total]
        if not new:
            return rejected
        rejected[new] = True


def test_singleton_blocks_are_holm_and_one_block_is_monotone_maxt() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        q = rng.uniform(0, 0.3, 17) ** 2
        assert np.allclose(block_adjusted(q, list(range(17))), adjust_pvalues(q, "holm"))
        ranks = rng.permutation(17)
        adj = block_adjusted(q, [0] * 17, ranks)
        order = np.argsort(ranks)
        assert np.allclose(adj[order], np.minimum(1.0, np.maximum.accumulate(q[order])))


def test_adjusted_pvalues_are_the_least_level_that_rejects() -> None:
    """adjusted ≤ α  ⇔  rejected by the literal step-down at α (levels just above and below
    every adjusted value, 400 random block structures)."""
    rng = np.random.default_rng(1)
    for _ in range(400):
        m = int(rng.integers(2, 14))
        q = rng.uniform(0, 0.12, m) ** 1.5
        blocks = rng.integers(0, 4, m)
        ranks = rng.permutation(m)
        adj = block_adjusted(q, blocks, ranks)
        for alpha in np.r_[adj * (1 + 1e-9), adj * (1 - 1e-9), 0.05]:
            if 0 < alpha < 1:
                assert np.array_equal(brute_stepdown(q, blocks, ranks, alpha), adj <= alpha)


def test_floored_statistic_only_changes_degenerate_groups() -> None:
    rng = np.random.default_rng(2)
    sums = rng.uniform(1, 5, size=(50, 2, 5))
    sums[..., 1] = rng.integers(40, 90, size=(50, 2))  # B: rows conditioned on
    sums[..., 0] = sums[..., 1] * rng.uniform(0.2, 0.8, size=(50, 2))  # A
    sums[..., 2] = sums[..., 0]  # 0/1 numerators: AA = A
    sums[..., 3] = sums[..., 0]  # AB = A
    sums[..., 4] = sums[..., 1]  # BB = B
    assert np.allclose(
        floored_statistic(sums[:, 0], sums[:, 1]), studentized_difference(sums[:, 0], sums[:, 1])[2]
    )
    zero = np.array([[0.0, 8, 0, 0, 8]])  # rate 0 of 8
    one = np.array([[9.0, 9, 9, 9, 9]])  # rate 1 of 9
    assert math.isinf(studentized_difference(zero, one)[2][0])
    z = floored_statistic(zero, one)[0]
    assert math.isfinite(z) and z == pytest.approx(-1 / math.sqrt(1 / 256 + 1 / 324))


def data(n: int, groups: int, rng: np.random.Generator, shift: float = 0.0) -> pd.DataFrame:
    g = rng.integers(groups, size=n)
    y = rng.binomial(1, 0.4, n)
    score = np.clip(rng.normal(0.35 + 0.3 * y + shift * (g == 0), 0.2), 0, 1)
    return pd.DataFrame({"g": g.astype(str), "y": y, "score": score})


def audit(
    frame: pd.DataFrame, multiplicity: str, seed: int, n_perm: int = 199, cap: int = 3_999
) -> AuditResult:
    ds = AuditDataset.from_frame(
        frame, ColumnRoles(label="y", protected=("g",), score="score"), threshold=0.5
    )
    cfg = PermutationConfig(
        metrics=["positive_rate", "tpr", "fpr"], n_permutations=n_perm, joint=True
    )
    methods = [group_parity(ds, tolerance=0.05), run_permutation_tests(ds, cfg, seed=seed)]
    return finalize_audit(
        config={},
        dataset=ds.summary(),
        model={},
        validation=None,
        methods=methods,
        multiplicity=multiplicity,
        gap_null="zero",
        resampling=ResamplingSettings(risk=0.01, max_resamples=cap),
        resampler=PermutationResampler(ds, cfg, seed=seed),
    )


def test_permutation_method_records_joint_blocks_and_the_audit_uses_them() -> None:
    rng = np.random.default_rng(3)
    res = audit(data(1500, 4, rng, shift=0.15), "maxt", seed=0)
    perm = res.method("permutation_tests")
    assert all(f.joint is not None for f in perm.findings)
    blocks = {f.joint.block for f in perm.findings if f.joint}
    assert blocks == {"permutation_tests.g"}
    ranks = sorted(f.joint.rank for f in perm.findings if f.joint)
    assert ranks == list(range(18))  # 3 metrics x 6 pairs, one step-down order
    deciding = [f for f in res.findings() if f.counts]
    assert {f.key.split(".")[0] for f in deciding} == {
        "perm_positive_rate",
        "perm_tpr",
        "perm_fpr",
    }  # gap_null zero: the permutation tests decide, group parity supports
    assert any(f.decision == "reject" and "g: 0" in f.label for f in deciding)
    back = AuditResult.from_json(res.to_json())
    assert [f.joint for f in back.findings()] == [f.joint for f in res.findings()]
    # the joint counts are the decision's evidence: the strongest test's maxT p-value equals
    # its (S + 1)/(n + 1) and the adjusted p-values are monotone along the step-down order
    by_rank = sorted((f for f in deciding if f.joint), key=lambda f: f.joint.rank)
    adj = [f.adjusted_pvalue for f in by_rank]
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(adj))


def test_joint_draws_extend_reproducibly() -> None:
    rng = np.random.default_rng(4)
    frame = data(900, 3, rng)
    ds = AuditDataset.from_frame(
        frame, ColumnRoles(label="y", protected=("g",), score="score"), threshold=0.5
    )
    cfg = PermutationConfig(metrics=["tpr", "fpr"], n_permutations=99, joint=True)
    keys = [f.key for f in run_permutation_tests(ds, cfg, seed=5).findings]
    a = PermutationResampler(ds, cfg, seed=5)
    b = PermutationResampler(ds, cfg, seed=5)
    got = [a.draw(k, "maxT permutation", 99, 500) for k in keys]
    assert got == [b.draw(k, "maxT permutation", 99, 500) for k in keys]
    assert all(0 <= s <= 500 for s in got)
    assert got != [a.draw(k, "maxT permutation", 599, 500) for k in keys]  # a new stream


@pytest.mark.slow
def test_familywise_error_of_whole_audits_under_the_complete_null() -> None:
    """Label, score and group independent (5 groups, 1,200 rows; 30 dependent deciding tests:
    3 rate metrics x 10 pairs, gap_null zero): the proportion of audits with any rejection is
    within α + 3 SE for maxt and for holm (N = 120 audits each; SE = √(0.05·0.95/120) = 0.020)."""
    rng = np.random.default_rng(6)
    n_audits = 120
    any_reject = {"maxt": 0, "holm": 0}
    for i in range(n_audits):
        frame = data(1200, 5, rng)
        for mult in any_reject:
            res = audit(frame, mult, seed=i)
            any_reject[mult] += any(f.decision == "reject" for f in res.findings() if f.counts)
    se = math.sqrt(0.05 * 0.95 / n_audits)
    for mult, count in any_reject.items():
        fwer = count / n_audits
        assert fwer <= 0.05 + 3 * se, f"{mult}: FWER {fwer:.3f} ({count}/{n_audits})"


def test_maxt_rejects_more_than_holm_when_tests_are_dependent() -> None:
    """Group 0 shifted (its 3 metrics x 4 pairs are false nulls, strongly dependent), 5 groups,
    1,000 rows, 16 audits, both procedures with the same sequential scheme (cap 99,999): maxT
    rejects more false nulls in total and never fewer by more than one in an audit (measured at
    writing: maxT 11, Holm 7 over 12 audits at shift 0.07)."""
    rng = np.random.default_rng(7)
    totals = {"maxt": 0, "holm": 0}
    gain = []
    for i in range(16):
        frame = data(1000, 5, rng, shift=0.08)
        n = {
            mult: sum(
                f.decision == "reject"
                for f in audit(frame, mult, seed=i, cap=99_999).findings()
                if f.counts
            )
            for mult in totals
        }
        for mult in totals:
            totals[mult] += n[mult]
        gain.append(n["maxt"] - n["holm"])
    assert totals["maxt"] > totals["holm"] and min(gain) >= -1, (totals, gain)


def test_decide_family_with_blocks_matches_the_exact_rule_when_intervals_are_tight() -> None:
    """With huge resample counts the Monte-Carlo intervals shrink onto p̃, and the decisions
    equal block_adjusted(p̃) ≤ α."""
    p = np.array([1e-4, 0.004, 0.02, 0.3, 0.011, 0.2])
    blocks = ["b", "b", "b", "b", None, None]
    n = 10_000_000
    tests = [
        FamilyTest(f"t{i}", pvalue=float(p[i]))
        if blk is None
        else FamilyTest(
            f"t{i}",
            parts=(ResamplingPart("maxT permutation", int(p[i] * n), n),),
            block=blk,
            rank=i,
        )
        for i, blk in enumerate(blocks)
    ]
    res = decide_family(tests, 0.05, "maxt")
    ids = [0, 0, 0, 0, -1, -2]
    expected = block_adjusted(p, ids, list(range(6))) <= 0.05
    assert [d.decision == "reject" for d in res.decisions] == expected.tolist()
    assert "undetermined" not in [d.decision for d in res.decisions]


def test_pairs_with_a_small_group_stay_out_of_the_joint_block() -> None:
    """A 40-row group (below joint_min_group_size = 100) keeps its pairs as blocks of one;
    the other pairs form the block, whose columns are exactly those pairs."""
    rng = np.random.default_rng(8)
    frame = data(1200, 3, rng)
    small = pd.DataFrame({"g": ["tiny"] * 40, "y": rng.binomial(1, 0.4, 40)})
    small["score"] = np.clip(rng.normal(0.5, 0.2, 40), 0, 1)
    frame = pd.concat([frame, small], ignore_index=True)
    ds = AuditDataset.from_frame(
        frame, ColumnRoles(label="y", protected=("g",), score="score"), threshold=0.5
    )
    cfg = PermutationConfig(metrics=["tpr", "fpr"], n_permutations=99, joint=True)
    res = run_permutation_tests(ds, cfg, seed=1)
    joint = {f.key: f.joint for f in res.findings}
    assert all((j is None) == ("tiny" in key) for key, j in joint.items()), joint
    assert sorted(j.rank for j in joint.values() if j) == list(range(6))  # 2 metrics x 3 pairs
    with pytest.raises(Exception, match="joint_min_group_size"):
        PermutationConfig(joint_min_group_size=1)
