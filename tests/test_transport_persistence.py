"""Fitted maps as files (save/load, to_state/from_state) and the content-addressed map cache,
down to the FlipTest task: a second run that changes only n_bootstrap loads the observed maps
instead of refitting them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairengine.dataset import AuditDataset
from fairengine.datasets import make_lipton_hiring
from fairengine.errors import DataContractError
from fairengine.fliptest import FlipTestConfig
from fairengine.fliptest.result import FlipTestDetails
from fairengine.transport import (
    EntropicMap,
    ExactOTMap,
    GANMap,
    LinearOTMap,
    MapCache,
    TransportMap,
    array_fingerprint,
)
from fairengine.transport.state_files import read_state, write_state


def _samples(seed: int = 0, n: int = 300, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(n, d)) * [1.0, 2.0, 0.5] + [0.0, 1.0, -1.0]
    xt = rng.gamma(2.0, size=(n + 20, d))
    return xs, xt


ESTIMATORS = {
    "entropic-selected-eps": lambda: EntropicMap(random_state=3),
    "entropic-fixed-eps": lambda: EntropicMap(epsilon=0.05, max_anchors=250),
    "exact": lambda: ExactOTMap(),
    "exact-sqcityblock": lambda: ExactOTMap(cost="sqcityblock"),
    "linear": lambda: LinearOTMap(),
    "gan-residual": lambda: GANMap(epochs=30, residual=True, random_state=2),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_round_trip_gives_identical_transform(name, tmp_path):
    xs, xt = _samples()
    if name.startswith("exact"):
        xt = xt[: len(xs)]  # the bijection case
    m = ESTIMATORS[name]()
    images = m.fit_transform(xs, xt)
    path = m.save(tmp_path / "map.npz")
    loaded = TransportMap.load(path)
    assert type(loaded) is type(m)
    assert loaded.get_params() == m.get_params()
    queries = np.random.default_rng(9).normal(size=(57, 3)) * 1.5
    np.testing.assert_array_equal(loaded.transform(queries), m.transform(queries))
    np.testing.assert_array_equal(loaded.transform(xs), m.transform(xs))
    np.testing.assert_array_equal(loaded.transform_fitted(xs), images)
    # the class-specific loader reads it too; from_state round-trips without a file
    np.testing.assert_array_equal(type(m).load(path).transform(queries), m.transform(queries))
    again = TransportMap.from_state(m.to_state())
    np.testing.assert_array_equal(again.transform(queries), m.transform(queries))


def test_entropic_state_keeps_selection_and_ood_guard(tmp_path):
    xs, xt = _samples(1)
    m = EntropicMap(random_state=4).fit(xs, xt)
    loaded = EntropicMap.load(m.save(tmp_path / "e.npz"))
    assert loaded.epsilon_ == m.epsilon_ and loaded.epsilon_abs_ == m.epsilon_abs_
    assert loaded.epsilon_scores_ == m.epsilon_scores_  # float keys survive JSON
    assert all(isinstance(k, float) for k in loaded.epsilon_scores_)
    assert loaded.get_params()["epsilon_grid"] == m.get_params()["epsilon_grid"]
    far = np.vstack([xs[:5], xs[:5] + 50.0])
    np.testing.assert_array_equal(loaded.ood_mask(far), m.ood_mask(far))
    assert loaded.ood_mask(far)[5:].all()


def test_exact_transform_fitted_is_the_bijection_even_with_duplicate_points(tmp_path):
    xs, xt = _samples(2, n=80)
    xs[1] = xs[0]  # duplicates: out-of-sample transform would give both the same image
    xt = xt[:80]
    m = ExactOTMap()
    images = m.fit_transform(xs, xt)
    loaded = ExactOTMap.load(m.save(tmp_path / "x.npz"))
    np.testing.assert_array_equal(loaded.transform_fitted(xs), images)
    # a bijection: every target point used once
    assert len(np.unique(loaded.transform_fitted(xs), axis=0)) == 80
    with pytest.raises(DataContractError, match="not the sample"):
        loaded.transform_fitted(xs[::-1])


def test_bad_files_and_states_raise_clear_errors(tmp_path):
    xs, xt = _samples()
    m = LinearOTMap().fit(xs, xt)
    path = m.save(tmp_path / "lin.npz")
    with pytest.raises(DataContractError, match="holds a LinearOTMap, expected EntropicMap"):
        EntropicMap.load(path)
    with pytest.raises(DataContractError, match="does not exist"):
        TransportMap.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(DataContractError, match="not a FairEngine map file"):
        TransportMap.load(tmp_path / "junk.npz")
    state = read_state(path)
    state["header"]["format"] = 999
    write_state(state, tmp_path / "future.npz")
    with pytest.raises(DataContractError, match="format 999"):
        TransportMap.load(tmp_path / "future.npz")
    with pytest.raises(Exception, match="not fitted"):
        LinearOTMap().save(tmp_path / "unfitted.npz")
    # no pickles inside: numpy refuses object arrays when allow_pickle=False
    with np.load(path, allow_pickle=False) as npz:
        assert all(npz[k].dtype != object for k in npz.files)
        header = json.loads(str(npz["__state__"]))
    assert header["class"] == "LinearOTMap" and "A_" not in header["fitted"]


def test_map_cache_hits_only_for_the_same_estimator_and_data(tmp_path, monkeypatch):
    xs, xt = _samples(5)
    cache = MapCache(tmp_path / "maps")
    est = EntropicMap(epsilon=0.05, random_state=1)
    images, _, path, hit = cache.fit_transform(est, xs, xt)
    assert not hit and path.is_file() and path.parent == tmp_path / "maps"
    header = read_state(path)["header"]
    assert header["provenance"]["source"] == array_fingerprint(xs)
    assert header["provenance"]["cache_key"] == path.stem

    calls = []
    real_fit = EntropicMap._fit
    monkeypatch.setattr(EntropicMap, "_fit", lambda self, zs, zt: calls.append(len(zs)))
    images2, _, path2, hit2 = cache.fit_transform(EntropicMap(epsilon=0.05, random_state=1), xs, xt)
    assert hit2 and path2 == path and calls == []  # loaded, not fitted
    np.testing.assert_array_equal(images2, images)
    assert (cache.hits, cache.misses) == (1, 1)

    monkeypatch.setattr(EntropicMap, "_fit", real_fit)
    changed = xs.copy()
    changed[7, 1] += 1e-9
    for est2, a, b in (
        (EntropicMap(epsilon=0.05, random_state=2), xs, xt),  # seed
        (EntropicMap(epsilon=0.06, random_state=1), xs, xt),  # epsilon
        (EntropicMap(epsilon=0.05, random_state=1), changed, xt),  # data
        (EntropicMap(epsilon=0.05, random_state=1), xt[: len(xs)], xs),  # direction
    ):
        _, _, p, h = cache.fit_transform(est2, a, b)
        assert not h and p != path
    assert cache.misses == 5


def test_map_cache_refits_a_corrupt_file(tmp_path):
    xs, xt = _samples(6)
    cache = MapCache(tmp_path)
    _, _, path, _ = cache.fit_transform(LinearOTMap(), xs, xt)
    path.write_bytes(b"truncated")
    images, _, path2, hit = cache.fit_transform(LinearOTMap(), xs, xt)
    assert not hit and path2 == path
    np.testing.assert_array_equal(TransportMap.load(path).transform_fitted(xs), images)


# ----------------------------------------------------------------------------- the task
def _hire_proba(df: pd.DataFrame) -> np.ndarray:
    z = 1.4028 * df["work_exp"].to_numpy() + 1.1688 * df["hair_len"].to_numpy() - 0.8684
    return 1 / (1 + np.exp(-40 * z))


@pytest.fixture(scope="module")
def lipton() -> AuditDataset:
    ds = make_lipton_hiring(300)
    return AuditDataset.from_frame(ds.frame, ds.roles)


@pytest.mark.parametrize("mode", ["demographic_parity", "equalized_odds"])
def test_task_reuses_the_observed_maps_when_only_n_bootstrap_changes(
    lipton, tmp_path, monkeypatch, mode
):
    from tasks.method_task import method_task

    fits: list[str] = []
    real_fit = TransportMap.fit

    def counting_fit(self, source, target):
        fits.append(array_fingerprint(source))
        return real_fit(self, source, target)

    # counted in this process: FlipTest's pairs on the calling thread (a worker process would
    # fit with its own, unpatched copy; tests/test_worker_processes.py checks both agree)
    monkeypatch.setenv("FAIRENGINE_WORKER_PROCESSES", "0")
    monkeypatch.setattr(TransportMap, "fit", counting_fit)
    # the null and bootstrap refits of entropic maps run as split / reweighted problems
    import fairengine.transport.entropic_batch as fstats  # FlipTest imports them on use

    refits: list[str] = []
    for name in ("split_refits", "reweighted_refits"):
        real = getattr(fstats, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            refits.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(fstats, name, counting)
    base = dict(
        enabled=True, epsilon=0.03, mode=mode, n_permutations=2, n_selfmap=2, validate=False
    )
    folder = tmp_path / "maps"
    first = method_task.fn(
        lipton,
        "fliptest",
        FlipTestConfig(n_bootstrap=2, **base),
        seed=3,
        model=_hire_proba,
        store=str(folder),
    )
    arts = first.artifacts
    n_maps = 2 * (2 if mode == "equalized_odds" else 1)  # directions x strata
    assert len(arts) == n_maps
    assert len({a.name for a in arts}) == n_maps
    assert all(a.path.startswith(str(folder)) and a.name.endswith(".npz") for a in arts)
    assert isinstance(first.details, FlipTestDetails)
    maps = [m for d in first.details.pairs[0].directions for m in d.maps]
    assert [m.loaded_from_cache for m in maps] == [False] * n_maps
    observed = {read_state(a.path)["header"]["provenance"]["source"] for a in arts}
    assert observed <= set(fits)  # the observed maps were fitted in the first run

    fits.clear()
    refits.clear()
    second = method_task.fn(
        lipton,
        "fliptest",
        FlipTestConfig(n_bootstrap=3, **base),
        seed=3,
        model=_hire_proba,
        store=str(folder),
    )
    assert isinstance(second.details, FlipTestDetails)
    maps2 = [m for d in second.details.pairs[0].directions for m in d.maps]
    assert [m.loaded_from_cache for m in maps2] == [True] * n_maps
    assert observed.isdisjoint(fits)  # ... and not refitted in the second
    # the null and bootstrap refits still ran (the permutation null as split problems)
    assert {"split_refits", "reweighted_refits"} <= set(refits)
    assert second.artifacts == arts
    for f1, f2 in zip(first.findings, second.findings, strict=True):
        assert f1.key == f2.key and f1.estimate == f2.estimate  # observed flipsets identical


def test_task_without_a_cache_folder_still_saves_maps_for_the_artifacts(lipton):
    from tasks.method_task import method_task

    cfg = FlipTestConfig(
        enabled=True, epsilon=0.03, n_permutations=0, n_selfmap=0, n_bootstrap=0, validate=False
    )
    r = method_task.fn(lipton, "fliptest", cfg, seed=0, model=_hire_proba)
    assert isinstance(r.details, FlipTestDetails) and r.details.map_cache is not None
    assert r.details.map_cache.reused_across_runs is False
    arts = r.artifacts
    assert [a.name for a in arts] == [
        "map_gender_man_to_woman.npz",
        "map_gender_woman_to_man.npz",
    ]
    for a in arts:
        assert TransportMap.load(a.path).get_params()["epsilon"] == 0.03
    not_run = method_task.fn(lipton, "fliptest", cfg, seed=0, model=None)
    assert not_run.status == "not_run" and not_run.artifacts == ()


def test_in_a_flow_the_maps_go_under_the_configured_cache_dir(lipton, tmp_path):
    """With the audit's step caching on (flows.method_steps.step_cache), the flow passes the
    task its map folder (<cache.dir>/fliptest-maps): maps land there and a second run with
    another n_bootstrap (a new step key, so the step itself re-runs) loads them. With caching
    off no folder is passed (the task keeps its maps in a temporary folder)."""
    from prefect import flow

    from fairengine.config import AuditConfig
    from fairengine.registry import method_spec
    from flows.method_steps import _call_kwargs, step_cache
    from tasks.method_task import method_task

    cfg = AuditConfig.from_dict({"cache": {"dir": str(tmp_path / "cache")}})
    options = step_cache(cfg, lipton, {"uri": "models:/test/1"})
    spec = method_spec("fliptest")
    kwargs = _call_kwargs(spec, cfg, _hire_proba)
    assert kwargs["store"] == str(tmp_path / "cache" / "fliptest-maps")
    off = AuditConfig.from_dict({"cache": {"enabled": False}})
    assert "store" not in _call_kwargs(spec, off, _hire_proba)

    @flow
    def audit(n_bootstrap: int):
        params = FlipTestConfig(
            enabled=True,
            epsilon=0.03,
            n_permutations=1,
            n_selfmap=1,
            n_bootstrap=n_bootstrap,
            validate=False,
        )
        task = method_task.with_options(name="fliptest", **options)
        return task(lipton, params=params, **kwargs)

    first = audit(1)
    paths = [a.path for a in first.artifacts]
    assert len(paths) == 2
    assert all(str(tmp_path / "cache" / "fliptest-maps") in p for p in paths)
    second = audit(2)
    assert isinstance(second.details, FlipTestDetails)
    loaded = [m.loaded_from_cache for d in second.details.pairs[0].directions for m in d.maps]
    assert loaded == [True, True]
    assert [a.path for a in second.artifacts] == paths
