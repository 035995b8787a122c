"""The typed ``dataset``, ``model`` and ``metadata`` of an audit result
(:mod:`fairengine.audit_context`): the JSON keeps its keys, older files read and write back
unchanged, and keys this version does not know are kept."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fairengine.audit_context import (
    AuditMetadata,
    DatasetSummary,
    MitigationRegistration,
    ModelIdentity,
    PreviousAudit,
)
from fairengine.audit_file import read_audit
from fairengine.results import AuditResult, Verdict

FORMAT1 = Path(__file__).parent / "data" / "full_audit_format1.json.gz"

DATASET = {
    "name": "demo-hiring",
    "source": "/data/lipton_hiring_audit.csv",
    "n_rows": 5000,
    "fingerprint": "f" * 64,
    "roles": {
        "label": "hired",
        "protected": ["gender"],
        "score": "_fairengine_score",
        "features": ["work_exp", "hair_len"],
        "weight": None,
    },
    "score_type": "probability",
    "threshold": 0.5,
    "positive_label": 1,
    "label_rate": 0.3578,
    "groups": {"gender": {"man": 2500, "woman": 2500}},
}
MODEL = {
    "uri": "models:/hiring/1",
    "name": "hiring",
    "version": "1",
    "alias": None,
    "run_id": "8d046e4d",
    "score_source": {"kind": "predict_proba", "description": "predict_proba, column 1"},
    "model_input": {
        "columns": ["work_exp", "hair_len", "age"],
        "origin": "signature",
        "conversions": [{"column": "age", "from_dtype": "int64", "to_type": "double"}],
    },
    "score_type": "probability",
    "threshold": 0.5,
}
METADATA = {
    "versions": {"python": "3.11.7", "fairengine": "0.1.0"},
    "fairengine_version": "0.1.0",
    "seed": 0,
    "timings": {"load_data": 0.06, "decide": 1.5},
    "previous_audits": [
        {
            "run_id": "r2",
            "audit_id": "a2",
            "model_version": "2",
            "verdict": "fail",
            "started_ms": 1764115200000,
            "estimates": {"dp_gap.gender.man_woman": 0.1},
            "decisions": None,
        },
        {
            "run_id": "r1",
            "audit_id": None,
            "model_version": "1",
            "verdict": "pass",
            "started_ms": 1764028800000,
            "estimates": {},
        },
    ],
}


def test_a_fresh_audits_json_reads_as_types_and_writes_back_the_same_keys() -> None:
    dataset = DatasetSummary.from_dict(DATASET)
    model = ModelIdentity.from_dict(MODEL)
    metadata = AuditMetadata.from_dict(METADATA)
    assert dataset.roles.protected == ("gender",) and dataset.groups["gender"]["man"] == 2500
    assert model.name == "hiring" and model.score_description == "predict_proba, column 1"
    assert model.model_input is not None  # nested JSON (objects in lists) kept as written
    assert model.model_input["conversions"] == [
        {"column": "age", "from_dtype": "int64", "to_type": "double"}
    ]
    assert metadata.timings["decide"] == 1.5 and metadata.seed == 0
    assert metadata.previous_audits is not None
    assert metadata.previous_audits[0].estimates == {"dp_gap.gender.man_woman": 0.1}
    assert (dataset.extra, model.extra, metadata.extra) == ({}, {}, {})
    for record, raw in ((dataset, DATASET), (model, MODEL), (metadata, METADATA)):
        assert record.to_dict() == raw
        assert list(record.to_dict()) == list(raw)  # the same keys, in the same order


def test_records_built_in_memory_write_the_keys_a_fresh_audit_writes() -> None:
    assert list(ModelIdentity(uri="python:Pipeline").to_dict()) == [
        "uri",
        "name",
        "version",
        "alias",
        "score_type",
        "threshold",
    ]  # a loaded model always says whether an alias named it
    assert list(ModelIdentity().to_dict()) == ["uri", "name", "version", "score_type", "threshold"]
    meta = AuditMetadata(seed=1, mitigation_registration=MitigationRegistration(False, "no"))
    assert meta.to_dict()["mitigation_registration"] == {
        "registered": False,
        "reason": "no",
        "uri": None,
    }
    assert "previous_audits" not in meta.to_dict()
    assert AuditMetadata.from_dict(meta.to_dict()) == meta
    assert PreviousAudit.from_dict(PreviousAudit(run_id="r").to_dict()) == PreviousAudit("r")


def test_unknown_keys_and_values_of_another_type_are_kept_verbatim() -> None:
    raw = {**MODEL, "flavor_notes": ["a", 1], "threshold": "0.5"}
    model = ModelIdentity.from_dict(raw)
    assert model.extra == {"flavor_notes": ["a", 1], "threshold": "0.5"}
    assert model.threshold is None
    assert model.to_dict() == raw


def test_the_format_1_fixture_reads_typed_and_writes_back_unchanged() -> None:
    raw = json.loads(gzip.decompress(FORMAT1.read_bytes()))
    result = read_audit(json.dumps(raw))
    assert result.dataset.name == "lipton-hiring-with-age"
    assert result.dataset.roles.protected == ("gender", "age_band")
    assert result.model.version == "1" and result.model.score_source is None
    assert result.metadata.timings["fliptest"] > 0
    out = result.to_dict()
    for key in ("dataset", "model", "metadata", "config"):
        assert out[key] == raw[key], key


def test_result_round_trip_through_json_keeps_every_typed_field() -> None:
    result = AuditResult(
        audit_id="a1",
        created_at="2026-11-26T00:00:00+00:00",
        config={"alpha": 0.05, "x": float("inf")},
        dataset=DatasetSummary.from_dict(DATASET),
        model=ModelIdentity.from_dict(MODEL),
        validation=None,
        methods=[],
        alpha=0.05,
        multiplicity="maxt",
        verdict=Verdict("pass", "no test rejects"),
        metadata=AuditMetadata.from_dict(METADATA),
    )
    text = result.to_json()
    back = read_audit(text)
    assert (back.dataset, back.model, back.metadata) == (
        result.dataset,
        result.model,
        result.metadata,
    )
    assert back.config == {"alpha": 0.05, "x": "Infinity"}
    assert back.to_json() == text


@pytest.mark.parametrize("record", [DatasetSummary(), ModelIdentity(), AuditMetadata()])
def test_records_are_frozen(record: object) -> None:
    with pytest.raises(AttributeError):
        record.extra = {}  # type: ignore[attr-defined]
