"""Intersectional target-ε tests decided sequentially: the audit draws more bootstrap or posterior
replicates where a decision is open (:class:`fairengine.intersectional.resampler.
IntersectionalResampler`, issue "Decisions users can trust", item 1)."""

from __future__ import annotations

import numpy as np
import pytest

from fairengine.dataset import AuditDataset
from fairengine.datasets import make_intersectional_synthetic
from fairengine.decisions import Resamplers
from fairengine.intersectional import IntersectionalConfig, run_intersectional
from fairengine.intersectional.resampler import IntersectionalResampler
from fairengine.verdict import finalize_audit

KEY = "df_eps.sp.attr__a_x_attr__b"  # true ε_sp = 1.107 on this generator


@pytest.fixture(scope="module")
def data():
    ds = make_intersectional_synthetic(n=20_000, seed=2)
    return AuditDataset.from_frame(ds.frame, ds.roles, threshold=0.5)


def _run(ds, target: float, draws: int = 99):
    cfg = IntersectionalConfig(
        target_epsilon=target, n_bootstrap=draws, n_posterior=draws, marginals=False
    )
    return cfg, run_intersectional(ds, cfg, seed=3)


def test_a_far_target_is_settled_by_more_draws(data) -> None:
    """With target 0.2 (far below ε_sp), 99 draws give p = 0.01, undetermined in a family of
    the audit's size; the resampler's further draws (none at or below the target) settle it
    as rejected."""
    cfg, res = _run(data, 0.2)
    f = next(x for x in res.findings if x.key == KEY)
    assert f.resampling[0].exceedances == 0 and f.resampling[0].resamples == 99
    plain = finalize_audit(config={}, dataset={}, model={}, validation=None, methods=[res])
    assert {x.key: x for x in plain.findings()}[KEY].decision == "undetermined"
    rs = IntersectionalResampler(data, cfg, res, seed=3)
    audit = finalize_audit(
        config={}, dataset={}, model={}, validation=None, methods=[res], resampler=rs
    )
    g = {x.key: x for x in audit.findings()}[KEY]
    assert g.decision == "reject"
    assert g.resampling[0].resamples > 99 and g.resampling[0].exceedances == 0


def test_draws_follow_the_runs_law_and_are_reproducible(data) -> None:
    """Near ε̂ the share of further draws at or below the target matches the run's own share
    (both estimate the same bootstrap/posterior probability; within 4 binomial SE), and a
    batch is a seeded stream of its own."""
    cfg0, res0 = _run(data, 1.0, draws=400)
    f = next(x for x in res0.findings if x.key == KEY)
    part = f.resampling[0]
    assert 0 < part.exceedances < part.resamples  # the target sits inside the distribution
    rs = IntersectionalResampler(data, cfg0, res0, seed=3)
    got = rs.draw(KEY, part.name, 400, 2000)
    assert got == IntersectionalResampler(data, cfg0, res0, seed=3).draw(KEY, part.name, 400, 2000)
    p_run, p_more = part.exceedances / part.resamples, got / 2000
    se = np.sqrt(p_run * (1 - p_run) * (1 / 400 + 1 / 2000))
    assert abs(p_run - p_more) < 4 * se + 1e-9, (p_run, p_more)


def test_without_a_target_or_for_other_methods_nothing_is_drawn(data) -> None:
    cfg = IntersectionalConfig(n_bootstrap=20, n_posterior=20, marginals=False)
    res = run_intersectional(data, cfg, seed=0)
    assert not IntersectionalResampler(data, cfg, res, seed=0).can_extend(KEY)
    both = Resamplers(None, IntersectionalResampler(data, cfg, res, seed=0))
    assert not both.can_extend(KEY)
