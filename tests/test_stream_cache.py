"""The cache of a streamed audit (tasks/caching.py ``streamed_source_identity``,
``counts_identity``): a re-run on unchanged files reuses the pass and every method step, as
the in-memory audit reuses its steps; a changed, added or merely touched file, or a changed
object in an object store (its ETag), gives the pass another key. The method steps are keyed
by the count tables' content, so a touched but unchanged file re-reads the files and reuses
the methods."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from engines_support import COUNT_METHODS, write_files
from engines_support import table as make_table
from object_store_support import s3_server

import fairengine
from fairengine.streaming import StreamSource
from tasks.caching import streamed_source_identity

pytestmark = pytest.mark.flow

STEP = "stream_data"


def _settings(tmp: Path, **extra) -> dict:
    return {
        "label": "y",
        "protected": ["race", "sex"],
        "score": "score",
        "methods": COUNT_METHODS,
        "engine": "stream",
        "batch_rows": 2_000,
        "sample_rows": 2_000,
        "cache": {"dir": str(tmp / "cache")},
        "output": {"dir": str(tmp / "reports")},
        **extra,
    }


def _comparable(result) -> dict:
    out = {k: v for k, v in result.to_dict().items() if k not in ("audit_id", "created_at")}
    out["metadata"] = {k: v for k, v in out["metadata"].items() if k != "timings"}
    out["warnings"] = [w for w in out["warnings"] if "cache" not in w]
    return out


def _reused(result) -> set[str]:
    return {k.removesuffix(" (cached)") for k in result.metadata.timings if k.endswith("(cached)")}


def test_identity_follows_each_files_size_and_version(tmp_path: Path) -> None:
    folder = write_files(make_table(3_000), tmp_path / "parts", k=3)
    settings = {"seed": 0, "threshold": 0.5}

    def key(**kw) -> str | None:
        return streamed_source_identity(
            "stream", StreamSource(str(folder)), {**settings, **kw}, {"uri": None}
        )

    base = key()
    assert base is not None and key() == base  # the same files: the same key
    assert key(seed=1) != base  # another setting of the pass
    other_engine = streamed_source_identity(
        "dask", StreamSource(str(folder)), settings, {"uri": None}
    )
    assert other_engine != base
    assert key() != streamed_source_identity(
        "stream", StreamSource(str(folder)), settings, {"uri": "models:/m/2"}
    )  # another model
    part = folder / "part-001.parquet"
    st = part.stat()
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # touched, same bytes
    touched = key()
    assert touched != base
    pd.read_parquet(part).iloc[:-1].to_parquet(part, index=False)  # one row fewer
    assert key() not in (base, touched)
    assert streamed_source_identity("dask", object(), settings, {}) is None  # no file versions


def test_a_rerun_on_unchanged_files_reuses_the_pass_and_every_method(tmp_path: Path) -> None:
    table = make_table(20_000, seed=6)
    folder = write_files(table, tmp_path / "parts", k=5)
    settings = _settings(tmp_path)
    first = fairengine.audit(str(folder), **settings)
    assert STEP in first.metadata.timings and not _reused(first)
    second = fairengine.audit(str(folder), **settings)
    assert _reused(second) == {STEP, *COUNT_METHODS}
    assert STEP not in second.metadata.timings
    assert _comparable(second) == _comparable(first)
    assert any("reused from the cache" in w for w in second.warnings)

    # touched, same bytes: the pass runs again (the key cannot know), the methods are reused
    part = folder / "part-002.parquet"
    st = part.stat()
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    touched = fairengine.audit(str(folder), **settings)
    assert STEP in touched.metadata.timings
    assert _reused(touched) == set(COUNT_METHODS)
    assert _comparable(touched) == _comparable(first)

    # one file changed: the pass and every method run again, on the new data
    changed = pd.read_parquet(part)
    changed["y"] = 1 - changed["y"]
    changed.to_parquet(part, index=False)
    third = fairengine.audit(str(folder), **settings)
    assert not _reused(third)
    assert third.dataset.n_rows == 20_000
    assert _comparable(third)["methods"] != _comparable(first)["methods"]

    # a file added: again
    table.iloc[:1_000].to_parquet(folder / "part-999.parquet", index=False)
    fourth = fairengine.audit(str(folder), **settings)
    assert not _reused(fourth) and fourth.dataset.n_rows == 21_000
    fifth = fairengine.audit(str(folder), **settings)  # and that state is cached in turn
    assert _reused(fifth) == {STEP, *COUNT_METHODS}


def test_a_changed_object_in_s3_invalidates_the_pass(tmp_path: Path) -> None:
    folder = write_files(make_table(12_000, seed=8), tmp_path / "parts", k=4)
    with s3_server() as s3:
        url = s3.upload(folder, "cached") + "/*.parquet"
        settings = _settings(tmp_path, storage_options=s3.storage_options)
        first = fairengine.audit(url, **settings)
        second = fairengine.audit(url, **settings)
        assert not _reused(first) and _reused(second) == {STEP, *COUNT_METHODS}
        changed = pd.read_parquet(folder / "part-003.parquet").iloc[:-500]
        changed.to_parquet(folder / "part-003.parquet", index=False)
        s3.filesystem().put_file(
            str(folder / "part-003.parquet"), f"{s3.bucket}/cached/part-003.parquet"
        )
        third = fairengine.audit(url, **settings)
    assert not _reused(third) and third.dataset.n_rows == 11_500
