"""Worker processes for the computations that hold the GIL (:mod:`fairengine.worker_processes`):
a computation gives the same result in a worker as on the calling thread, falls back to the
thread when it cannot go to a worker, and its own errors reach the caller unchanged; FlipTest's
pairs and its further refits give the same numbers either way."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from fairengine import worker_processes
from fairengine.dataset import AuditDataset
from fairengine.datasets import make_lipton_hiring
from fairengine.errors import ConfigError, DataContractError
from fairengine.fliptest import FlipTestConfig, run_fliptest
from fairengine.fliptest.resampler import FlipTestResampler
from fairengine.roles import ColumnRoles
from fairengine.transport import MapCache


def pid_and_sum(values: np.ndarray) -> tuple[int, float]:
    return os.getpid(), float(values.sum())


def raise_contract_error(column: str) -> None:
    raise DataContractError(f"column {column!r} is not numeric")


class Unpicklable:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # locks do not pickle

    def __call__(self) -> int:
        return os.getpid()


@pytest.fixture
def two_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(worker_processes.ENV, "2")


def test_runs_in_another_process_with_the_same_result(two_workers) -> None:
    x = np.arange(1000, dtype=float)
    pid, total = worker_processes.run(pid_and_sum, x)
    assert worker_processes.last_fallback() is None
    assert pid != os.getpid()
    assert total == pid_and_sum(x)[1]


def test_errors_of_the_computation_reach_the_caller_unchanged(two_workers) -> None:
    with pytest.raises(DataContractError, match="column 'age' is not numeric"):
        worker_processes.run(raise_contract_error, "age")


def test_falls_back_to_the_calling_thread(monkeypatch: pytest.MonkeyPatch, two_workers) -> None:
    f = Unpicklable()
    assert worker_processes.run(f) == os.getpid()  # the payload does not pickle
    assert "do not pickle" in (worker_processes.last_fallback() or "")
    monkeypatch.setenv(worker_processes.ENV, "0")
    x = np.ones(5)
    assert worker_processes.run(pid_and_sum, x) == (os.getpid(), 5.0)
    assert "FAIRENGINE_WORKER_PROCESSES=0" in (worker_processes.last_fallback() or "")


def test_worker_count_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(worker_processes.ENV, "3")
    assert worker_processes.workers() == 3
    monkeypatch.setenv(worker_processes.ENV, "0")
    assert worker_processes.workers() == 0
    monkeypatch.setenv(worker_processes.ENV, "two")
    with pytest.raises(ConfigError, match=r"FAIRENGINE_WORKER_PROCESSES.*'two'"):
        worker_processes.workers()
    monkeypatch.delenv(worker_processes.ENV)
    cores = len(os.sched_getaffinity(0))
    assert worker_processes.workers() == (0 if cores < 2 else min(4, cores))


@pytest.fixture(scope="module")
def hiring():
    data = make_lipton_hiring(n_per_group=150, seed=5)
    roles = data.roles
    feats = list(roles.features)
    model = LogisticRegression().fit(data.frame[feats], data.frame[roles.label])
    frame = data.frame.assign(score=model.predict_proba(data.frame[feats])[:, 1])
    ds = AuditDataset.from_frame(
        frame,
        ColumnRoles(label=roles.label, protected=roles.protected, features=feats, score="score"),
        threshold=0.5,
    )

    def predict_proba(df):  # a closure: travels to the workers by value (cloudpickle)
        return model.predict_proba(df[feats])

    return ds, predict_proba


def _run(ds, pp, tmp_path, n_jobs: int):
    cfg = FlipTestConfig(
        enabled=True, epsilon=0.05, n_permutations=9, n_selfmap=9, n_bootstrap=9, n_jobs=n_jobs
    )
    cache = MapCache(tmp_path)
    return cfg, run_fliptest(ds, cfg, seed=2, predict_proba=pp, map_cache=cache), cache


def test_fliptest_pairs_and_refits_equal_in_workers_and_on_threads(
    hiring, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both directions of the pair in a worker process give the thread's findings and details
    exactly; the map cache counts the worker's fits; the decision step's further refits too,
    in pieces over several workers."""
    ds, pp = hiring
    monkeypatch.setenv(worker_processes.ENV, "2")
    cfg, in_workers, cache_w = _run(ds, pp, tmp_path / "w", n_jobs=1)
    monkeypatch.setenv(worker_processes.ENV, "0")
    _, on_thread, cache_t = _run(ds, pp, tmp_path / "t", n_jobs=1)
    assert in_workers.parameters["pairs_in_worker_processes"] == 1
    assert on_thread.parameters["pairs_in_worker_processes"] == 0
    assert in_workers.findings == on_thread.findings
    # the details name each map's file, in each run's own cache folder
    assert repr(in_workers.details).replace(str(tmp_path / "w"), "<cache>") == repr(
        on_thread.details
    ).replace(str(tmp_path / "t"), "<cache>")
    assert (cache_w.hits, cache_w.misses) == (cache_t.hits, cache_t.misses)
    assert cache_w.misses > 0
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == sorted(
        p.name for p in (tmp_path / "t").iterdir()
    )

    key = next(f.key for f in on_thread.findings if f.resampling)
    draws = {}
    for mode in ("2", "0"):
        monkeypatch.setenv(worker_processes.ENV, mode)
        rs = FlipTestResampler(ds, cfg, on_thread, predict_proba=pp, seed=2)
        # 230 refits: three pieces of whole chunks, spread over the workers
        draws[mode] = [rs.draw(key, part, 9, 230) for part in ("self-map", "permutation")]
        assert (worker_processes.last_fallback() is None) == (mode == "2")
    assert draws["2"] == draws["0"]


def test_run_many_if_warm_uses_the_workers_only_while_they_are_up(
    two_workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.arange(10, dtype=float)
    monkeypatch.setattr(worker_processes, "_last_used", None)  # no call given to the pool yet
    assert not worker_processes.pool_is_warm()
    here = worker_processes.run_many_if_warm(pid_and_sum, [(x,), (x,)])
    assert worker_processes.last_fallback() == "the worker processes are not up"
    assert {pid for pid, _ in here} == {os.getpid()}
    worker_processes.run(pid_and_sum, x)  # the workers are up now
    assert worker_processes.pool_is_warm()
    spread = worker_processes.run_many_if_warm(pid_and_sum, [(x,), (x,)])
    assert worker_processes.last_fallback() is None
    assert os.getpid() not in {pid for pid, _ in spread}
    assert [t for _, t in spread] == [t for _, t in here]
    # loky stops idle workers after IDLE_SECONDS: by then the pool no longer counts as up
    monkeypatch.setattr(
        worker_processes, "_last_used", time.monotonic() - worker_processes.IDLE_SECONDS
    )
    assert not worker_processes.pool_is_warm()
    monkeypatch.setenv(worker_processes.ENV, "0")
    worker_processes.run(pid_and_sum, x)
    assert not worker_processes.pool_is_warm()  # turned off


def test_fliptest_report_view_is_the_same_drawn_in_the_workers(
    hiring, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's FlipTest directions are drawn in the worker processes while they are up
    (after the audit's FlipTest), else on the calling thread: the same view either way."""
    from tasks.report.views import fliptest as fliptest_view

    ds, pp = hiring
    monkeypatch.setenv(worker_processes.ENV, "2")
    _, result, _ = _run(ds, pp, tmp_path, n_jobs=1)  # FlipTest in the workers: they are up
    assert worker_processes.pool_is_warm()
    in_workers = fliptest_view.view(result)
    assert worker_processes.last_fallback() is None
    assert len(in_workers["directions"]) == 2
    assert all(d["plots"] and d["reports"] for d in in_workers["directions"])
    monkeypatch.setattr(worker_processes, "_last_used", None)
    here = fliptest_view.view(result)
    assert worker_processes.last_fallback() == "the worker processes are not up"
    assert here == in_workers
