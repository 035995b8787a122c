"""FlipTest's flipsets decided sequentially: the audit draws more null refits where a decision is
open (:class:`fairengine.fliptest.resampler.FlipTestResampler`, issue "Decisions users can
trust", item 6)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from fairengine.dataset import AuditDataset
from fairengine.datasets import make_lipton_hiring
from fairengine.decisions import BoundedResampler, Resamplers
from fairengine.errors import ConfigError
from fairengine.fliptest import FlipTestConfig, run_fliptest
from fairengine.fliptest import resampler as resampler_module
from fairengine.fliptest.resampler import FlipTestResampler
from fairengine.fliptest.result import FlipTestDetails
from fairengine.fliptest.statistics import draw_labels, permutation_rates
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit

POS = "fliptest_pos.gender.man_woman"  # the large flipset (about 40 % of men)
NEG = "fliptest_neg.gender.man_woman"  # empty


@pytest.fixture(scope="module")
def hiring():
    """Lipton et al.'s hiring data (200 per gender) scored by a logistic regression that uses
    hair length, the proxy FlipTest's paper finds."""
    data = make_lipton_hiring(n_per_group=200, seed=3)
    roles = data.roles
    feats = list(roles.features)
    model = LogisticRegression().fit(data.frame[feats], data.frame[roles.label])
    frame = data.frame.assign(score=model.predict_proba(data.frame[feats])[:, 1])
    ds = AuditDataset.from_frame(
        frame,
        ColumnRoles(label=roles.label, protected=roles.protected, features=feats, score="score"),
        threshold=0.5,
    )

    def predict_proba(df):
        return model.predict_proba(df[feats])

    return ds, predict_proba


def _config(**kw) -> FlipTestConfig:
    base = dict(
        enabled=True,
        epsilon=0.05,
        n_permutations=19,
        n_selfmap=19,
        n_bootstrap=0,
        validate=False,
        n_jobs=1,
    )
    return FlipTestConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def run(hiring):
    ds, pp = hiring
    cfg = _config()
    return cfg, run_fliptest(ds, cfg, seed=4, predict_proba=pp)


def test_first_look_leaves_the_large_flipset_at_the_floor(run) -> None:
    _, res = run
    f = {x.key: x for x in res.findings}
    assert f[POS].estimate > 0.25
    assert [(p.name, p.exceedances, p.resamples) for p in f[POS].resampling] == [
        ("permutation", 0, 19),
        ("self-map", 0, 19),
    ]


def test_the_audit_draws_refits_until_the_large_flipset_is_rejected(hiring, run) -> None:
    """At 19 refits the flipset's p-value is 0.05 (undetermined in a family of 4); the audit
    draws more refits of both nulls and rejects it; the empty flipsets are settled at once."""
    ds, pp = hiring
    cfg, res = run
    audit = finalize_audit(
        config={},
        dataset={},
        model={},
        validation=None,
        methods=[res],
        resampler=FlipTestResampler(ds, cfg, res, predict_proba=pp, seed=4),
    )
    f = {x.key: x for m in audit.methods for x in m.findings}
    assert f[POS].decision == "reject"
    drawn = {p.name: p for p in f[POS].resampling}
    assert set(drawn) == {"permutation", "self-map"}
    assert all(19 < p.resamples <= cfg.max_null_refits for p in drawn.values())
    assert all(p.exceedances == 0 for p in drawn.values())
    assert f[NEG].decision == "fail_to_reject"
    assert [p.resamples for p in f[NEG].resampling] == [19, 19]  # settled without drawing
    assert audit.decisions.resamples_drawn > 0


def test_without_the_resampler_or_under_a_low_cap_it_stays_undetermined(hiring, run) -> None:
    """No resampler: undetermined at 19 refits. A cap too low to certify the flipset: no refit
    is drawn in vain, and the finding says how many would settle it."""
    ds, pp = hiring
    cfg, res = run
    plain = finalize_audit(config={}, dataset={}, model={}, validation=None, methods=[res])
    assert {x.key: x for x in plain.methods[0].findings}[POS].decision == "undetermined"
    low = replace(cfg, max_null_refits=60)
    audit = finalize_audit(
        config={},
        dataset={},
        model={},
        validation=None,
        methods=[res],
        resampler=FlipTestResampler(ds, low, res, predict_proba=pp, seed=4),
    )
    f = {x.key: x for x in audit.methods[0].findings}[POS]
    assert f.decision == "undetermined"
    assert [p.resamples for p in f.resampling] == [19, 19]  # futile: nothing drawn
    assert f.resamples_needed is not None and f.resamples_needed > 60
    assert "max_null_refits" in f.reading


def test_draws_are_reproducible_and_one_batch_serves_every_test_it_can(
    hiring, run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch is a seeded stream of its own: drawn again by a new resampler it gives the same
    exceedances; F+ and F- of a direction, and (shared permutation null at equal ε) the
    reverse direction, reuse one batch of refits."""
    ds, pp = hiring
    cfg, res = run
    calls: list[int] = []
    real = resampler_module.permutation_rates
    # counted in this process: the refits on the calling thread (a worker process would call
    # its own, unpatched copy; tests/test_worker_processes.py checks both give the same rates)
    monkeypatch.setenv("FAIRENGINE_WORKER_PROCESSES", "0")

    def counting(*args, **kwargs):
        calls.append(len(args[-1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(resampler_module, "permutation_rates", counting)
    a = FlipTestResampler(ds, cfg, res, predict_proba=pp, seed=4)
    b = FlipTestResampler(ds, cfg, res, predict_proba=pp, seed=4)
    rev = "fliptest_neg.gender.woman_man"
    got_a = [a.draw(k, "permutation", 19, 40) for k in (POS, NEG, rev)]
    assert calls == [40]  # one batch of 40 refits for all three tests
    got_b = [b.draw(k, "permutation", 19, 40) for k in (rev, NEG, POS)][::-1]
    assert got_a == got_b
    assert a.draw(NEG, "permutation", 19, 40) == 40  # the empty flipset: every draw >= 0
    other = a.draw(POS, "permutation", 59, 40)  # a new start is a new stream
    assert calls == [40, 40, 40] and other == 0


def test_extended_draws_follow_the_runs_null(hiring, run) -> None:
    """The resampler refits the run's pairs at the run's frozen ε: the same rows, and null
    rates from the same law as the run's own permutation refits (means within 4 SE)."""
    ds, pp = hiring
    cfg, res = run
    rs = FlipTestResampler(ds, cfg, res, predict_proba=pp, seed=4)
    state = rs._state(0)
    assert isinstance(res.details, FlipTestDetails)
    assert len(state.xa) == res.details.pairs[0].n[0]
    rates = rs._batch(("permutation", 0, -1, 1000, 120), rs._tests[POS][0])
    # the run's law: refits of the same rows with the run's own estimator, another stream
    est = rs._estimators(res.details.pairs[0].directions[0].epsilon, state.sa)
    labels = draw_labels(np.random.default_rng(99), state.sa, state.sb, 120)
    ref, _ = permutation_rates(
        est, state.xa, state.xb, state.sa, state.sb, state.decide, "man", "woman", labels
    )
    for j in range(2):
        se = np.sqrt(rates[:, j].var() / 120 + ref[:, j].var() / 120) + 1e-9
        assert abs(rates[:, j].mean() - ref[:, j].mean()) < 4 * se
    assert rates[:, 0].max() < 0.25  # the null is far below the observed 40 %


def test_resampler_is_bounded_and_routed_by_key(hiring, run) -> None:
    ds, pp = hiring
    cfg, res = run
    rs = FlipTestResampler(ds, cfg, res, predict_proba=pp, seed=4)
    assert isinstance(rs, BoundedResampler)
    both = Resamplers(None, rs)
    assert both.can_extend(POS) and not both.can_extend("perm_tpr.gender.man_woman")
    assert both.max_resamples(POS) == cfg.max_null_refits
    assert both.cap_setting(POS) == "methods.fliptest.max_null_refits"
    assert both.cap_setting("perm_tpr.gender.man_woman") == "decisions.max_resamples"
    with pytest.raises(KeyError, match="perm_tpr"):
        both.draw("perm_tpr.gender.man_woman", "permutation", 0, 1)
    # a run without a model function, or a different configuration, draws nothing
    assert not FlipTestResampler(ds, cfg, res, predict_proba=None, seed=4).can_extend(POS)
    other = replace(cfg, attributes=["gender"], max_pairs=1, min_group_size=10_000)
    assert not FlipTestResampler(ds, other, res, predict_proba=pp, seed=4).can_extend(POS)
    assert not FlipTestResampler(
        ds, replace(cfg, max_null_refits=0), res, predict_proba=pp, seed=4
    ).can_extend(POS)


def test_max_null_refits_must_be_a_non_negative_integer() -> None:
    with pytest.raises(ConfigError, match="max_null_refits"):
        FlipTestConfig(max_null_refits=-1)
    with pytest.raises(ConfigError, match="max_null_refits"):
        FlipTestConfig(max_null_refits=2.5)  # type: ignore[arg-type]
