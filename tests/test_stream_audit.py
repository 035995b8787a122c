"""A streamed audit through the flow (``data.engine: stream``, issue "Audits of data larger
than memory"): the same findings as the in-memory audit for everything computed from counts,
the engine choice, the checks before the start, a model scoring batch by batch, the methods
that need rows listed with the reason, and errors naming the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

import fairengine
from fairengine.errors import FairEngineError
from flows.method_steps import NEEDS_MODEL_REASON

COUNT_METHODS = ["group_parity", "group_metrics", "permutation_tests", "intersectional"]


def _table(n: int = 60_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    race = rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1])
    x = rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(x + 0.4 * (race == "a"))))).astype(int)
    score = 1 / (1 + np.exp(-(0.9 * x + 0.5 * (race == "a"))))
    return pd.DataFrame(
        {"race": race, "sex": rng.choice(["f", "m"], n), "x": x, "y": y, "score": score}
    )


def _parts(df: pd.DataFrame, folder: Path, k: int = 7) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-len(df) // k)
    for i in range(k):
        df.iloc[i * step : (i + 1) * step].to_parquet(folder / f"part-{i:03d}.parquet", index=False)
    return folder


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return _table()


@pytest.fixture(scope="module")
def parts(table: pd.DataFrame, session_tmp: Path) -> Path:
    return _parts(table, session_tmp / "stream-parts")


def _settings(session_tmp: Path, **extra) -> dict:
    return {
        "label": "y",
        "protected": ["race", "sex"],
        "methods": COUNT_METHODS,
        "cache": {"enabled": False},
        "output": {"dir": str(session_tmp / "stream-reports")},
        **extra,
    }


def _compare(streamed, in_memory) -> None:
    a = {f.key: f for f in streamed.findings()}
    b = {f.key: f for f in in_memory.findings()}
    assert set(a) == set(b) and len(a) > 50
    same = [k for k in a if "auc" not in k]  # the stream's AUC is the binned one
    assert len(same) > 40
    for k in same:
        fa, fb = a[k], b[k]
        assert fa.estimate == pytest.approx(fb.estimate, abs=1e-12, nan_ok=True), k
        assert (fa.pvalue is None) == (fb.pvalue is None), k
        if fa.pvalue is not None:
            assert fa.pvalue == pytest.approx(fb.pvalue, abs=1e-12), k
        assert fa.decision == fb.decision, k
    assert streamed.verdict.status == in_memory.verdict.status


def test_a_streamed_audit_gives_the_in_memory_findings(table, parts, session_tmp) -> None:
    # the permutation tests decide (gap_null zero), so the decisions draw more of them
    settings = _settings(
        session_tmp, score="score", decisions={"gap_null": "zero"}, multiplicity="holm"
    )
    streamed = fairengine.audit(
        str(parts / "*.parquet"), engine="stream", batch_rows=5_000, sample_rows=5_000, **settings
    )
    in_memory = fairengine.audit(table, **settings)
    _compare(streamed, in_memory)
    assert any("streamed audit (data.engine: stream): 60,000 rows in 7 file(s)" in w
               for w in streamed.warnings)  # fmt: skip
    assert streamed.dataset.n_rows == 60_000 and streamed.dataset.fingerprint
    assert streamed.validation is not None
    assert "stratified sample of" in streamed.validation.engine
    # the decisions drew more permutations from the cell counts where a decision was open
    drawn = [
        sum(p.resamples for p in f.resampling)
        for f in streamed.method("permutation_tests").findings
        if f.resampling
    ]
    assert max(drawn) > 1999


def test_auto_streams_folders_and_large_parquet_files(parts, session_tmp) -> None:
    settings = _settings(session_tmp, score="score", methods=["group_parity"])
    one = str(parts / "part-000.parquet")  # 8,572 rows
    small = fairengine.audit(one, stream_above_rows=10_000, **settings)
    assert not any("streamed audit" in w for w in small.warnings)
    big = fairengine.audit(one, stream_above_rows=5_000, **settings)
    assert any("streamed audit" in w for w in big.warnings)
    folder = fairengine.audit(str(parts), **settings)  # several files: always streamed
    assert any("streamed audit" in w for w in folder.warnings)


def test_a_model_scores_each_batch(table, parts, session_tmp) -> None:
    model = LogisticRegression().fit(table[["x"]], table["y"])
    settings = _settings(session_tmp, model=model, features=["x"])
    streamed = fairengine.audit(str(parts), engine="stream", batch_rows=8_000, **settings)
    in_memory = fairengine.audit(table, **settings)
    _compare(streamed, in_memory)
    assert streamed.model.uri is not None and streamed.model.uri.startswith("python:")


def test_methods_that_need_rows_say_so(table, parts, session_tmp) -> None:
    """With a score column there is no model to query: FlipTest is not run, with the reason
    (with a model it runs on the self-weighting sample: tests/test_stream_row_methods.py)."""
    res = fairengine.audit(
        str(parts), engine="stream", **_settings(session_tmp, score="score",
                                                 methods=["group_parity", "fliptest"]),
    )  # fmt: skip
    flip = res.method("fliptest")
    assert flip.status == "not_run" and flip.reason == NEEDS_MODEL_REASON


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("drop_race", "part-002.parquet: missing column(s) ['race']"),
        ("null_race", "part-002.parquet, batch 0: 1 row(s) with a null 'race'"),
        ("text_score", "part-002.parquet: column 'score' has type "),
    ],
)
def test_a_bad_file_is_named(table, session_tmp, change: str, message: str) -> None:
    folder = _parts(table.iloc[:7_000], session_tmp / f"bad-{change}")
    bad = pd.read_parquet(folder / "part-002.parquet")
    if change == "drop_race":
        bad = bad.drop(columns=["race"])
    elif change == "null_race":
        bad.loc[bad.index[0], "race"] = None
    else:
        bad["score"] = bad["score"].astype(str)
    bad.to_parquet(folder / "part-002.parquet", index=False)
    with pytest.raises(FairEngineError) as err:
        fairengine.audit(str(folder), engine="stream", **_settings(session_tmp, score="score"))
    assert message in str(err.value)


def test_stream_refuses_what_it_cannot_read(table, session_tmp) -> None:
    with pytest.raises(FairEngineError) as err:
        fairengine.audit(table, engine="stream", **_settings(session_tmp, score="score"))
    assert "data.engine: stream cannot read this audit's data: the data is a DataFrame" in str(
        err.value
    )
    with pytest.raises(FairEngineError) as err:
        fairengine.audit(table, engine="spark", **_settings(session_tmp, score="score"))
    assert "data.engine: spark cannot read this audit's data: the data is a DataFrame" in str(
        err.value
    )
    with pytest.raises(FairEngineError) as err:
        fairengine.audit(table, engine="ray", **_settings(session_tmp, score="score"))
    assert "data.engine must be one of ['auto', 'pandas', 'stream', 'dask', 'spark']" in str(
        err.value
    )


def test_the_decisions_draw_more_permutations_of_the_sample_for_its_tests(
    table, parts, session_tmp
) -> None:
    """The AUC tests of a streamed audit run on the stratified sample; where their decision is
    open, the decisions draw more permutations of the same sample (the in-memory resampler's
    seed convention on the sample's rows), not "undetermined" at the first batch's resolution."""
    from fairengine.dataset import AuditDataset
    from fairengine.permutation.config import PermutationConfig
    from fairengine.permutation.method import CountsPermutationResampler, PermutationResampler
    from fairengine.roles import ColumnRoles
    from fairengine.streaming import stream_counts
    from fairengine.streaming.sample import WEIGHT_COLUMN

    roles = ColumnRoles(label="y", protected=("race", "sex"), score="score")
    counts = stream_counts(str(parts), roles, threshold=0.5, sample_rows=5_000, seed=3)
    assert counts.sample is not None
    sample = AuditDataset.from_frame(
        counts.sample.frame.drop(columns=[WEIGHT_COLUMN]), roles, threshold=0.5
    )
    config = PermutationConfig()
    on_counts = CountsPermutationResampler(counts, config, seed=3, sample=sample)
    without = CountsPermutationResampler(counts, config, seed=3)
    on_rows = PermutationResampler(sample, config, seed=3)
    key = "perm_auc.race.a_b"
    assert on_counts.can_extend(key) and not without.can_extend(key)
    assert on_counts.can_extend("perm_positive_rate.race.a_b")  # from the cell counts
    drawn = on_counts.draw(key, "permutation", 1999, 200)
    assert drawn == on_rows.draw(key, "permutation", 1999, 200)
    # through the flow: group c's scores carry less of x (a lower AUC); at a strict α the
    # sample's AUC tests stay open after the first 1,999 permutations and draw more
    noisy = 1 / (1 + np.exp(-(0.3 * table.x + np.random.default_rng(1).normal(size=len(table)))))
    weak = table.assign(score=np.where(table.race == "c", noisy, table.score))
    folder = _parts(weak, session_tmp / "stream-parts-weak-auc", k=3)
    settings = _settings(session_tmp, score="score", alpha=0.01, methods=["permutation_tests"])
    res = fairengine.audit(str(folder), engine="stream", sample_rows=5_000, **settings)
    auc = {
        f.key: f for f in res.method("permutation_tests").findings if f.key.startswith("perm_auc")
    }
    assert auc and all("from a sample of" in f.label for f in auc.values())
    drawn = sum(p.resamples for p in auc["perm_auc.race.a_c"].resampling)
    assert drawn > 1999 and auc["perm_auc.race.a_c"].decision == "reject"
