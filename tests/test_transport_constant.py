"""Features constant over source and target: an error by default, held fixed with
``constant_features="hold"`` (what FlipTest's refits on halves and resamples of one group need:
one-hot columns are often constant there)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairengine.dataset import AuditDataset
from fairengine.errors import DataContractError
from fairengine.fliptest import FlipTestConfig, run_fliptest
from fairengine.fliptest.result import FlipTestDetails
from fairengine.roles import ColumnRoles
from fairengine.transport import EntropicMap, ExactOTMap, GANMap, LinearOTMap, TransportMap

MAPS = {
    "entropic": lambda **kw: EntropicMap(epsilon=0.05, **kw),
    "exact": lambda **kw: ExactOTMap(**kw),
    "linear": lambda **kw: LinearOTMap(**kw),
    "gan": lambda **kw: GANMap(epochs=30, **kw),
}


def _samples() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(120, 2))
    xt = rng.normal(size=(120, 2)) * [1.5, 0.7] + [1.0, -0.5]
    return xs, xt


def _with_constant(x: np.ndarray, value: float) -> np.ndarray:
    """Insert a constant column between the two real features."""
    return np.c_[x[:, :1], np.full(len(x), value), x[:, 1:]]


@pytest.mark.parametrize("kind", sorted(MAPS))
def test_constant_feature_is_an_error_by_default(kind):
    xs, xt = _samples()
    with pytest.raises(DataContractError, match=r"\['x1'\] are constant over source and target"):
        MAPS[kind]().fit(_with_constant(xs, 2.0), _with_constant(xt, 2.0))


@pytest.mark.parametrize("kind", sorted(MAPS))
def test_held_feature_keeps_its_value_and_the_rest_is_the_map_without_it(kind, tmp_path):
    xs, xt = _samples()
    held = MAPS[kind](constant_features="hold").fit(
        _with_constant(xs, 2.0), _with_constant(xt, 2.0)
    )
    plain = MAPS[kind]().fit(xs, xt)
    assert held.active_.tolist() == [True, False, True]
    queries = np.random.default_rng(9).normal(size=(25, 2))
    out = held.transform(_with_constant(queries, 2.0))
    assert np.all(out[:, 1] == 2.0)
    # the moved features are exactly what the map fitted without the constant column gives
    np.testing.assert_allclose(out[:, [0, 2]], plain.transform(queries), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        held.transform_fitted(_with_constant(xs, 2.0))[:, [0, 2]],
        plain.transform_fitted(xs),
        rtol=1e-6,
        atol=1e-6,
    )
    # a saved and reloaded map keeps the held feature
    again = TransportMap.load(held.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(again.transform(_with_constant(queries, 2.0)), out)


def test_hold_still_rejects_all_constant_and_bad_setting():
    x = np.ones((30, 2))
    with pytest.raises(DataContractError, match="every feature is constant"):
        LinearOTMap(constant_features="hold").fit(x, x)
    xs, xt = _samples()
    with pytest.raises(DataContractError, match="constant_features must be 'raise' or 'hold'"):
        LinearOTMap(constant_features="drop").fit(xs, xt)


def test_entropic_flags_queries_off_a_held_constant():
    xs, xt = _samples()
    m = EntropicMap(epsilon=0.05, constant_features="hold").fit(
        _with_constant(xs, 0.0), _with_constant(xt, 0.0)
    )
    q = _with_constant(np.array([[0.0, 0.0], [0.2, -0.1], [0.0, 0.1], [-0.1, 0.0]]), 0.0)
    q[2, 1] = 1.0  # e.g. a one-hot category this source group never had
    assert m.ood_mask(q).tolist() == [False, False, True, False]


def test_fliptest_runs_with_one_hot_columns_constant_within_a_group():
    """The Adult case: a one-hot column that is all 0 in one group (e.g. relationship=Husband
    among women) is constant in every self-map refit of that group; one absent from both groups
    of a pair is held with a warning; a column constant over the whole data is an error naming
    it."""
    rng = np.random.default_rng(0)
    gender = np.repeat(["man", "woman", "other"], [300, 300, 80])
    x = rng.normal(size=len(gender)) + (gender == "man") * 0.5
    husband = ((gender == "man") & (rng.random(len(gender)) < 0.6)).astype(float)
    frame = pd.DataFrame(
        {"gender": gender, "x": x, "husband": husband, "rare": 0.0, "hired": x > 0.3}
    )
    roles = ColumnRoles(label="hired", protected=("gender",), features=("x", "husband", "rare"))
    cfg = FlipTestConfig(enabled=True, epsilon=0.05, n_permutations=3, n_selfmap=3, n_bootstrap=3)

    def proba(df: pd.DataFrame) -> np.ndarray:
        return 1 / (1 + np.exp(-(df["x"].to_numpy() + df["husband"].to_numpy() - 0.3)))

    with pytest.raises(DataContractError, match=r"\['rare'\] are constant over the whole"):
        run_fliptest(AuditDataset.from_frame(frame, roles), cfg, predict_proba=proba)

    frame.loc[frame["gender"] == "other", "rare"] = 1.0  # a category only "other" has
    r = run_fliptest(AuditDataset.from_frame(frame, roles), cfg, seed=1, predict_proba=proba)
    assert r.status == "ok"
    assert isinstance(r.details, FlipTestDetails)
    pairs = {p.groups: p for p in r.details.pairs}
    assert set(pairs) == {("man", "woman"), ("man", "other"), ("other", "woman")}
    for p in pairs.values():
        for d in p.directions:
            for _, fs in d.flipsets.items():
                assert fs.selfmap_null is not None
                assert fs.permutation_null is not None
    held = [w for w in r.warnings if "holds feature(s) ['rare']" in w]
    assert held == [
        "FlipTest holds feature(s) ['rare'] fixed for gender: 'man' vs 'woman': "
        "constant in both groups"
    ]
    # in man vs woman the held feature has no displacement in any flipset
    for d in pairs[("man", "woman")].directions:
        for (_, report), (_, fs) in zip(d.transparency.items(), d.flipsets.items(), strict=True):
            entries = {e.feature: e for e in report.features}
            if "rare" in entries and fs.count:
                assert entries["rare"].mean_difference == 0.0
