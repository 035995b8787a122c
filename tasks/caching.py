"""Cache keys of the audit's method steps: what was computed, on what, by which code.

A method step's result is reused (Prefect task caching with persisted results) exactly when all
of these are unchanged:

* the data: :meth:`AuditDataset.fingerprint` (a SHA-256 of the content of the role and feature
  columns, not object identity) and the dataset settings that change predictions (score type,
  threshold, positive label, roles);
* the model: its URI, resolved registry version and run id (an alias that moved to another
  version gives another key);
* the step's parameters (its ``methods.<name>`` config section and the seed);
* the code: the source of the step's task (Prefect's ``TASK_SOURCE``) and a hash of the whole
  ``fairengine`` package source, so a change in the math invalidates its results.

Changing one method's parameters changes only that step's key, so only it is recomputed.

A **streamed audit** (``data.engine: stream``, ``dask``, ``spark``) cannot fingerprint its data
by content short of reading it, so the pass itself is keyed by what identifies the files
without reading them (:func:`streamed_source_identity`): every file's path, size and version
(modification time of a local file; ``ETag``/``VersionId``/``generation`` of an object), the
engine, the settings of the pass (roles, score type, threshold, positive label, features,
batch and sample sizes, seed), the model's identity and the code. A re-run on unchanged files
reuses the pass's count tables and sample; a changed, added or removed file gives another key.
Its method steps are keyed like the in-memory ones, with the content of the count tables and
the sample (:func:`counts_identity`) as the data's identity.

Data validation (Great Expectations, :func:`tasks.validate.validate_data`) is cached the same
way, with :func:`validation_cache_options` (``flows/audit.py``): its key is the content
fingerprint of the validated table (every column, scores included), the column roles, the
checks' parameters and the source of ``tasks/validate.py`` plus the engine. A failed validation
raises, so it is never cached.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect.cache_policies import TASK_SOURCE, CachePolicy

from fairengine.dataset import AuditDataset, frame_fingerprint
from fairengine.results import to_jsonable

MODEL_ARGUMENTS = frozenset({"model", "predict_proba"})
"""Task arguments that carry the model object; its identity enters the key instead."""


@cache
def engine_source_hash() -> str:
    """SHA-256 over the source of every module of the installed ``fairengine`` package."""
    spec = importlib.util.find_spec("fairengine")  # not `import fairengine`: its front door
    assert spec is not None and spec.origin is not None  # (audit, compare) sits above tasks
    root = Path(spec.origin).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@cache
def module_source_hash(module: str) -> str:
    """SHA-256 of the source file of ``module`` (found without importing it)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"cannot hash the source of module {module!r}: not found")
    return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()


def dataset_identity(dataset: AuditDataset) -> str:
    """Content fingerprint of the data plus the settings that turn it into predictions."""
    settings = {
        "fingerprint": dataset.fingerprint(),
        "roles": dataset.roles.to_dict(),
        "score_type": dataset.score_type,
        "threshold": dataset.threshold,
        "positive_label": str(dataset.positive_label),
    }
    return json.dumps(settings, sort_keys=True)


def model_identity(model_info: dict[str, Any]) -> str:
    """The audited model as far as the registry knows it (URI, version, run), or a Python
    model object's content fingerprint (:func:`tasks.model_objects.object_fingerprint`)."""
    keys = ("uri", "name", "version", "run_id", "fingerprint")
    return json.dumps({k: model_info.get(k) for k in keys}, sort_keys=True, default=str)


def streamed_source_identity(
    engine: str, source: Any, settings: dict[str, Any], model_info: dict[str, Any]
) -> str | None:
    """The identity of a streamed pass over files (module docstring): ``source`` a
    :class:`fairengine.streaming.StreamSource` or a Spark source reading files; ``None`` for a
    source without file versions (a Dask or Spark DataFrame, a catalog table)."""
    files = getattr(source, "files", None)  # SparkSource: its StreamSource of the files, if any
    stream = source if hasattr(source, "versions") else files
    if stream is None or not hasattr(stream, "versions"):
        return None
    return json.dumps(
        {
            "engine": engine,
            "protocol": stream.protocol,
            "format": stream.format,
            "files": stream.versions(),
            "settings": to_jsonable(settings),
            "model": model_identity(model_info),
            "code": module_source_hash("tasks.stream_data"),
        },
        sort_keys=True,
        default=str,
    )


def counts_identity(counts: Any, sample: AuditDataset | None) -> str:
    """Content identity of a streamed audit's count tables
    (:class:`fairengine.streaming.StreamedCounts`: every grid and histogram array, the
    categories and the settings) and of its stratified sample (every column, the design
    weights included), for the keys of the method steps."""
    h = hashlib.sha256()
    head = {
        "roles": counts.roles.to_dict(),
        "categories": {a: list(c) for a, c in counts.categories.items()},
        "n_rows": counts.n_rows,
        "score_type": counts.score_type,
        "threshold": counts.threshold,
        "positive_label": str(counts.positive_label),
        "weighted": counts.weighted,
        "has_scores": counts.has_scores,
        "bins": counts.bins,
        "label_rate": counts.label_rate,
    }
    h.update(json.dumps(head, sort_keys=True, default=str).encode())
    arrays = [(f"grid.{k}", counts.grid[k]) for k in sorted(counts.grid)]
    arrays += [("hist_w", counts.hist_w), ("hist_w2", counts.hist_w2)]
    for name, arr in arrays:
        h.update(name.encode())
        if arr is not None:
            a = np.ascontiguousarray(arr)
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(a.tobytes())
    drawn = counts.sample
    if drawn is not None:
        h.update(f"sample {drawn.sample_rows} {drawn.level} {drawn.seed}".encode())
        h.update(frame_fingerprint(drawn.frame, list(drawn.frame.columns)).encode())
        h.update(frame_fingerprint(drawn.strata, list(drawn.strata.columns)).encode())
    if sample is not None:
        h.update(dataset_identity(sample).encode())
    return h.hexdigest()


@dataclass
class IdentityPolicy(CachePolicy):
    """Key = a precomputed identity (:func:`streamed_source_identity`) + the engine source
    hash; the task's inputs (the source, the model) are covered by the identity."""

    identity: str = ""

    def compute_key(
        self,
        task_ctx: Any,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        h = hashlib.sha256(self.identity.encode())
        h.update(engine_source_hash().encode())
        return h.hexdigest()


def persisted_cache_options(
    policy: CachePolicy, root: Path, expiration_days: float
) -> dict[str, Any]:
    """``Task.with_options`` keywords that cache a step by ``policy`` (configured with its key
    storage, ``root/keys``), its results persisted in ``root/results``, kept
    ``expiration_days``."""
    return {
        "cache_policy": policy,
        "persist_result": True,
        "result_storage": root / "results",
        "cache_expiration": timedelta(days=expiration_days),
    }


def streamed_pass_cache_options(
    identity: str | None, root: Path | None, expiration_days: float = 30.0
) -> dict[str, Any]:
    """``Task.with_options`` keywords that cache a streamed pass under ``root`` by
    ``identity``; ``{}`` when either is ``None`` (cache off, or a source without file
    versions)."""
    if root is None or identity is None:
        return {}
    policy = IdentityPolicy(identity=identity) + TASK_SOURCE
    return persisted_cache_options(
        policy.configure(key_storage=root / "keys"), root, expiration_days
    )


@dataclass
class AuditStepPolicy(CachePolicy):
    """Key = data identity + model identity + the step's other inputs + engine source hash.
    The inputs named in ``covered`` (besides any :class:`AuditDataset` and the model) are
    covered by the data identity and left out."""

    data: str = ""
    model: str = ""
    covered: tuple[str, ...] = ()

    def compute_key(
        self,
        task_ctx: Any,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        h = hashlib.sha256()
        for part in (self.data, self.model, engine_source_hash()):
            h.update(part.encode())
        for name in sorted(inputs):
            value = inputs[name]
            if isinstance(value, AuditDataset) or name in MODEL_ARGUMENTS or name in self.covered:
                continue  # covered by the data and model identities
            h.update(name.encode())
            h.update(json.dumps(to_jsonable(value), sort_keys=True).encode())
        return h.hexdigest()


def method_cache_policy(
    dataset: AuditDataset, model_info: dict[str, Any], key_storage: Path
) -> CachePolicy:
    """The cache policy of a method step: :class:`AuditStepPolicy` plus the task's source."""
    policy = AuditStepPolicy(data=dataset_identity(dataset), model=model_identity(model_info))
    return (policy + TASK_SOURCE).configure(key_storage=key_storage)


def counts_cache_policy(data_identity: str, key_storage: Path) -> CachePolicy:
    """The cache policy of a streamed audit's method step: :class:`AuditStepPolicy` with the
    count tables' and sample's content (:func:`counts_identity`) as the data identity (the
    model's scores are in the counts), plus the task's source."""
    policy = AuditStepPolicy(data=data_identity, covered=("counts", "sample"))
    return (policy + TASK_SOURCE).configure(key_storage=key_storage)


@dataclass
class FrameStepPolicy(CachePolicy):
    """Key of a step over a raw table: content fingerprint of every DataFrame input (all its
    columns, in order), the other inputs as JSON, the engine source and ``source_modules``."""

    source_modules: tuple[str, ...] = ()

    def compute_key(
        self,
        task_ctx: Any,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        h = hashlib.sha256(engine_source_hash().encode())
        for module in self.source_modules:
            h.update(module_source_hash(module).encode())
        for name in sorted(inputs):
            value = inputs[name]
            h.update(name.encode())
            if isinstance(value, pd.DataFrame):
                h.update(frame_fingerprint(value, list(value.columns)).encode())
            else:
                h.update(json.dumps(to_jsonable(value), sort_keys=True).encode())
        return h.hexdigest()


def validation_cache_options(root: Path | None, expiration_days: float = 30.0) -> dict[str, Any]:
    """``Task.with_options`` keywords that cache :func:`tasks.validate.validate_data` under
    ``root`` (the audit's cache directory); ``{}`` when ``root`` is ``None`` (cache off)."""
    if root is None:
        return {}
    policy = FrameStepPolicy(source_modules=("tasks.validate",)) + TASK_SOURCE
    return persisted_cache_options(
        policy.configure(key_storage=root / "keys"), root, expiration_days
    )
