"""Two audits that start together (a new model version and its alias) may both find no audit
experiment and both create it: the loser of that race must use the winner's experiment, not
fail the audit (seen in the deployment test: RESOURCE_ALREADY_EXISTS, UNIQUE constraint)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from mlflow import MlflowClient

from tasks.mlflow_log import ensure_experiment


class _LateClient:
    """get_experiment_by_name sees nothing, then create fails: another writer won."""

    def __init__(self) -> None:
        self.calls = 0

    def get_experiment_by_name(self, name: str):
        self.calls += 1
        return None if self.calls == 1 else SimpleNamespace(experiment_id="7")

    def create_experiment(self, name: str, artifact_location=None):
        raise RuntimeError(
            f"RESOURCE_ALREADY_EXISTS: Experiment(name={name}) already exists. Error: "
            "(sqlite3.IntegrityError) UNIQUE constraint failed"
        )


def test_the_loser_of_the_creation_race_reads_the_winners_experiment() -> None:
    assert ensure_experiment(_LateClient(), "audits", "http://127.0.0.1:5000") == "7"


def test_another_creation_error_is_raised() -> None:
    client = _LateClient()
    client.create_experiment = lambda *a, **k: (_ for _ in ()).throw(ValueError("bad name"))
    with pytest.raises(ValueError, match="bad name"):
        ensure_experiment(client, "audits", "http://127.0.0.1:5000")


def test_concurrent_creations_on_a_real_store_share_one_experiment(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(tracking_uri=uri).search_experiments()  # the schema, before the race
    ids: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def create() -> None:
        try:
            start.wait()
            ids.append(ensure_experiment(MlflowClient(tracking_uri=uri), "raced", uri))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(ids)) == 1 and len(ids) == 4
