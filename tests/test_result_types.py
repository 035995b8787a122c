"""Typed method details: a real (small) run of each method round-trips through strict JSON to
equal typed details and the same JSON, and a stored details JSON of format 1 (the shape written
before typed details) decodes as today's type."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fairengine.registry  # noqa: F401  (registers every built-in method's details type)
from fairengine.results import MethodResult

DATA = Path(__file__).parent / "data"


def strict_round_trip(result: MethodResult) -> MethodResult:
    """``result`` written as strict JSON and read back."""
    return MethodResult.from_dict(json.loads(json.dumps(result.to_dict(), allow_nan=False)))


# --------------------------------------------------------------------------- permutation_tests


# --------------------------------------------------------------------------- mitigation


def _mitigation_dataset():
    from fairengine.dataset import AuditDataset
    from fairengine.roles import ColumnRoles

    rng = np.random.default_rng(1)
    n = 2000
    sex = rng.choice(["female", "male"], n, p=[0.4, 0.6])
    race = rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1])
    y = rng.binomial(1, np.where(sex == "male", 0.45, 0.3))
    x = rng.normal(y * 1.2, 1.0) + np.where(sex == "male", 0.8, 0.0) - 0.5
    frame = pd.DataFrame({"sex": sex, "race": race, "y": y, "s": 1 / (1 + np.exp(-x))})
    return AuditDataset.from_frame(
        frame, ColumnRoles("y", ("sex", "race"), score="s"), threshold=0.5
    )


def _mitigation_config(**kw):
    from fairengine.mitigation import MitigationConfig

    return MitigationConfig(
        enabled=True,
        constraints=["sp"],
        epsilon=0.2,
        variants=["randomization_only", "thresholds_only", "overall"],
        n_thresholds=10,
        n_posterior=200,
        n_realised=20,
        **kw,
    )


def test_mitigation_details_round_trip() -> None:
    from fairengine.mitigation import run_mitigation
    from fairengine.mitigation.result import DeployedMitigation

    r = run_mitigation(_mitigation_dataset(), _mitigation_config(), seed=0)
    assert r.status == "ok", r.reason
    assert isinstance(r.details, DeployedMitigation) and r.details.comparison is not None
    d = r.to_dict()
    back = MethodResult.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert isinstance(back.details, DeployedMitigation)
    assert back.details == r.details and back.to_dict() == d


def test_mitigation_details_of_an_unfitted_deployed_variant_round_trip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deployed variant fails to fit: the details keep the variants and the audited model's
    held-out evaluation (:class:`MitigationDetails`, not a deployed rule)."""
    from fairengine.mitigation import MitigationInfeasible, RTDPPostProcessor, run_mitigation
    from fairengine.mitigation.result import DeployedMitigation, MitigationDetails

    fit = RTDPPostProcessor.fit

    def failing_fit(self, *args, **kw):
        if self.variant == "overall":
            raise MitigationInfeasible("no rule fits (made to fail by the test)")
        return fit(self, *args, **kw)

    monkeypatch.setattr(RTDPPostProcessor, "fit", failing_fit)
    r = run_mitigation(_mitigation_dataset(), _mitigation_config(compare_fairlearn=False), seed=0)
    assert r.status == "failed" and "made to fail" in (r.reason or "")
    d = r.to_dict()
    back = MethodResult.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert type(back.details) is MitigationDetails and not isinstance(
        back.details, DeployedMitigation
    )
    assert back.details == r.details and back.to_dict() == d
    assert [v.status for v in back.details.variants] == ["ok", "ok", "infeasible"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("mitigation_result_format1.json", "DeployedMitigation"),
        ("mitigation_failed_result_format1.json", "MitigationDetails"),
    ],
)
def test_mitigation_details_of_format_1_decode(name: str, kind: str) -> None:
    """Results written before typed details (``tests/data``, commit 62fa723) read as today's
    types; a fitted run's details give the same JSON again. The failed run's JSON gains two
    keys as null: ``base.fit`` and each variant's ``deployed`` (absent when nothing was
    deployed)."""
    stored = json.loads((DATA / name).read_text())
    r = MethodResult.from_dict(stored)
    assert type(r.details).__name__ == kind
    again = r.to_dict()["details"]
    if kind == "DeployedMitigation":
        assert again == stored["details"]
    else:
        assert again["base"] == {"fit": None, **stored["details"]["base"]}
        assert again["variants"] == [{**v, "deployed": None} for v in stored["details"]["variants"]]


# --------------------------------------------------------------------------- permutation_tests


def _without_added_nulls(new: object, old: object) -> object:
    """``new`` without the keys ``old`` lacks, each of which must be null (an optional field
    written as null where the format-1 JSON left the key out)."""
    if isinstance(new, dict) and isinstance(old, dict):
        extra = set(new) - set(old)
        assert all(new[k] is None for k in extra), {k: new[k] for k in extra}
        return {k: _without_added_nulls(v, old[k]) for k, v in new.items() if k in old}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [_without_added_nulls(a, b) for a, b in zip(new, old, strict=True)]
    return new


def _permutation_dataset():
    from fairengine.dataset import AuditDataset
    from fairengine.roles import ColumnRoles

    rng = np.random.default_rng(0)
    n = 600
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.35, 0.15])
    y = rng.binomial(1, 0.4, n)
    y[race == "c"] = 0  # tpr and auc are undefined for c: skipped tests
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1)
    frame = pd.DataFrame({"race": race, "y": y, "s": s})
    return AuditDataset.from_frame(frame, ColumnRoles("y", ("race",), score="s"), threshold=0.5)


@pytest.mark.parametrize("studentize", ["per_permutation", "lift_compat"])
def test_permutation_details_round_trip(studentize: str) -> None:
    from fairengine.permutation import PermutationConfig, run_permutation_tests
    from fairengine.permutation.result import PermutationDetails

    cfg = PermutationConfig(
        metrics=["positive_rate", "tpr", "auc"],
        n_permutations=99,
        studentize=studentize,
        n_bootstrap=20,
    )
    r = run_permutation_tests(_permutation_dataset(), cfg, seed=0)
    assert isinstance(r.details, PermutationDetails) and r.details.skipped
    paths = {t.path for t in r.details.tests}
    assert paths == {"cells", "auc-numpy"}
    d = r.to_dict()
    back = MethodResult.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert isinstance(back.details, PermutationDetails)
    assert back.details == r.details and back.to_dict() == d


def test_permutation_details_of_format_1_decode() -> None:
    """A result written before typed details (``tests/data``, commit 62fa723: tpr on the cells
    path, AUC, four skipped tests) reads as :class:`PermutationDetails` and gives the same JSON
    again, except the path-specific keys it lacked, now written as null (``cell_counts_a``,
    ``cell_counts_b``, ``variance_a``, ``variance_b``, ``bootstrap_sd``)."""
    from fairengine.permutation.result import PermutationDetails

    stored = json.loads((DATA / "permutation_tests_result_format1.json").read_text())
    r = MethodResult.from_dict(stored)
    assert isinstance(r.details, PermutationDetails)
    assert [t.path for t in r.details.tests] == ["cells", "auc-numpy"]
    assert len(r.details.skipped) == 4 and r.details.family.keys == tuple(
        t.key for t in r.details.tests
    )
    again = r.to_dict()
    assert _without_added_nulls(again["details"], stored["details"]) == stored["details"]
    assert {k: v for k, v in again.items() if k != "details"} == {
        k: v for k, v in stored.items() if k != "details"
    }


# --------------------------------------------------------------------------- intersectional


def test_intersectional_details_round_trip() -> None:
    from fairengine.dataset import AuditDataset
    from fairengine.datasets import make_intersectional_synthetic
    from fairengine.intersectional import IntersectionalConfig, run_intersectional
    from fairengine.intersectional.result import IntersectionalDetails

    syn = make_intersectional_synthetic(n=3000, seed=0)
    ds = AuditDataset.from_frame(syn.frame, syn.roles, threshold=0.5)
    cfg = IntersectionalConfig(n_bootstrap=50, n_posterior=50, target_epsilon=0.5)
    r = run_intersectional(ds, cfg, seed=0)
    details = r.details
    assert isinstance(details, IntersectionalDetails)
    assert details.bias_amplification is not None and len(details.rates) == 3
    d = r.to_dict()
    back = MethodResult.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert isinstance(back.details, IntersectionalDetails)
    assert back.details == details and back.to_dict() == d


def test_intersectional_details_without_amplification_round_trip() -> None:
    """Labels only: no bias amplification (null) and only the base rate in the rate tables."""
    from fairengine.dataset import AuditDataset
    from fairengine.datasets import make_intersectional_synthetic
    from fairengine.intersectional import IntersectionalConfig, run_intersectional
    from fairengine.intersectional.result import IntersectionalDetails
    from fairengine.roles import ColumnRoles

    syn = make_intersectional_synthetic(n=2000, seed=1)
    ds = AuditDataset.from_frame(syn.frame, ColumnRoles("y", ("attr_a", "attr_b"), features=()))
    r = run_intersectional(ds, IntersectionalConfig(n_bootstrap=30, n_posterior=30), seed=0)
    details = r.details
    assert isinstance(details, IntersectionalDetails) and details.bias_amplification is None
    tab = details.rates["attr__a_x_attr__b"]
    assert tab.base_rate is not None and tab.selection_rate is None
    d = r.to_dict()
    assert d["details"]["bias_amplification"] is None
    back = MethodResult.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert back.details == details and back.to_dict() == d


def test_intersectional_details_of_format_1_decode() -> None:
    """A result written before typed details (``tests/data``, commit 62fa723: sp, slift and
    elift with a target ε, bias amplification, no marginals) reads as
    :class:`IntersectionalDetails` and gives the same JSON again, except the optional keys it
    lacked, now written as null: per metric ``epsilon_both`` or ``epsilon_positive`` (the
    configured convention's) and ``overall_rate`` (all but elift), and the rate tables' rates
    no metric used (``tpr``, ``fpr``)."""
    from fairengine.intersectional.metrics import EpsilonConventions
    from fairengine.intersectional.result import IntersectionalDetails

    stored = json.loads((DATA / "intersectional_result_format1.json").read_text())
    r = MethodResult.from_dict(stored)
    details = r.details
    assert isinstance(details, IntersectionalDetails)
    sp = details.metrics["sp"]["attr__a_x_attr__b"]
    assert isinstance(sp.convention, EpsilonConventions) and sp.epsilon_both is not None
    assert sp.estimators.bootstrap.prob_at_most_target is not None
    assert details.bias_amplification is not None
    again = r.to_dict()
    assert _without_added_nulls(again["details"], stored["details"]) == stored["details"]
    assert {k: v for k, v in again.items() if k != "details"} == {
        k: v for k, v in stored.items() if k != "details"
    }
