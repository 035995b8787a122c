"""Issue 8's cache claims on a real Prefect (test harness) server:

* a second run of the same audit reuses every method step and gives the same JSON (apart from the
  run's id, date and timings); changing only ``methods.permutation_tests.n_permutations``
  recomputes only the permutation step;
* data validation can be cached by the content of the table (tasks/caching.py
  ``validation_cache_options``), so a re-run does not repeat the Great Expectations checks.

The speed claim (>= 10x) is measured by ``benchmarks/cache_rerun.py``, not asserted here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairengine.roles import ColumnRoles
from tasks.caching import FrameStepPolicy

pytestmark = pytest.mark.flow

VOLATILE = ("audit_id", "created_at")


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


def scored(n: int = 1500, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["f", "m"], n)
    race = rng.choice(["a", "b"], n, p=[0.7, 0.3])
    y = rng.binomial(1, 0.4, n)
    score = np.clip(rng.normal(0.35 + 0.25 * y + 0.1 * (sex == "m"), 0.2), 0, 1)
    return pd.DataFrame({"sex": sex, "race": race, "y": y, "score": score})


def comparable(d: dict) -> dict:
    out = {k: v for k, v in d.items() if k not in VOLATILE}
    out["metadata"] = {k: v for k, v in d["metadata"].items() if k != "timings"}
    return out


def own(method: dict) -> dict:
    """A method's result without the fields the audit's multiplicity adjustment sets."""
    audit_level = ("adjusted_pvalue", "decision", "reading")
    findings = [{k: v for k, v in f.items() if k not in audit_level} for f in method["findings"]]
    return {**method, "findings": findings}


def test_rerun_reuses_every_method_and_a_new_permutation_count_reruns_only_that_step(
    tmp_path: Path,
) -> None:
    from flows.audit import audit_flow

    data = tmp_path / "d.csv"
    scored().to_csv(data, index=False)
    config = {
        "data": {"path": str(data)},
        "columns": {"label": "y", "protected": ["sex", "race"], "score": "score"},
        "methods": {"permutation_tests": {"n_permutations": 199}},
        "output": {"dir": str(tmp_path / "out")},
        "mlflow": {"enabled": False},
        "cache": {"dir": str(tmp_path / "cache")},
    }
    first = audit_flow(config).result
    second = audit_flow(config).result
    ran = [m.method for m in first.methods if m.status == "ok"]
    assert {"group_parity", "group_metrics", "permutation_tests", "intersectional"} <= set(ran)
    t1, t2 = first.metadata.timings, second.metadata.timings
    assert all(m in t1 and f"{m} (cached)" not in t1 for m in ran)  # cold: computed
    assert all(f"{m} (cached)" in t2 and m not in t2 for m in ran)  # re-run: all reused
    assert comparable(first.to_dict()) == comparable(second.to_dict())

    config["methods"]["permutation_tests"]["n_permutations"] = 99
    third = audit_flow(config).result
    t3 = third.metadata.timings
    recomputed = [m for m in ran if m in t3]
    assert recomputed == ["permutation_tests"]
    assert all(f"{m} (cached)" in t3 for m in ran if m != "permutation_tests")
    perm = third.method("permutation_tests")
    assert perm.parameters["n_permutations"] == 99
    assert perm.to_dict() != first.method("permutation_tests").to_dict()
    for m in ran:  # the other results are reused as they were (apart from the audit-level
        if m != "permutation_tests":  # multiplicity adjustment over all tests)
            assert own(third.method(m).to_dict()) == own(first.method(m).to_dict())


def test_validation_key_follows_the_table_content_and_the_check_parameters() -> None:
    policy = FrameStepPolicy(source_modules=("tasks.validate",))
    roles = ColumnRoles("y", ("sex",), score="score")
    frame = scored()

    def key(f: pd.DataFrame, **params: object) -> str | None:
        inputs = {"frame": f, "roles": roles, "min_group_size": 30, **params}
        return policy.compute_key(None, inputs, {})

    base = key(frame)
    assert key(frame.copy()) == base  # another object, the same content
    assert key(frame.iloc[::-1].iloc[::-1]) == base  # a derived frame with the same content
    changed = frame.copy()
    changed.loc[7, "score"] = 0.123456
    assert key(changed) != base
    assert key(frame, min_group_size=31) != base
    assert key(frame.rename(columns={"score": "s"})) != base


def test_validation_is_cached_by_content(tmp_path: Path, monkeypatch) -> None:
    from prefect import flow

    import tasks.validate
    from tasks.caching import validation_cache_options

    calls: list[int] = []
    real = tasks.validate.validate_frame

    def counting(frame, roles, **kwargs):
        calls.append(len(frame))
        return real(frame, roles, **kwargs)

    monkeypatch.setattr(tasks.validate, "validate_frame", counting)
    options = validation_cache_options(tmp_path / "cache")
    task = tasks.validate.validate_data.with_options(**options)
    roles = ColumnRoles("y", ("sex", "race"), score="score")

    @flow
    def validate(seed: int) -> tuple[object, str]:
        frame = scored(seed=seed)  # a new DataFrame object every run
        state = task(frame, roles, min_group_size=10, return_state=True)
        return state.result(), state.name

    first, state1 = validate(3)
    again, state2 = validate(3)  # the same content
    assert calls == [1500] and (state1, state2) == ("Completed", "Cached")
    assert again.to_dict() == first.to_dict() and first.success
    _, state3 = validate(4)
    assert calls == [1500, 1500] and state3 == "Completed"
    assert validation_cache_options(None) == {}
