"""The methods that need rows in a streamed audit (issue 21): FlipTest, the individual-fairness
test and mitigation run on the self-weighting subsample of the stream's stratified sample
(:mod:`fairengine.streaming.self_weighting`), with the model's handles.

What is checked: the subsample's sizes m_s = ⌊f N_s + ½⌋ (f the smallest sampling fraction);
every row's inclusion frequency over seeds equals its stratum's π_s = m_s / N_s (|π_s − f| ≤
1/(2N_s)) within Monte-Carlo error (chi-square over the rows of each stratum); the Dask
engine's merged reservoirs give the stream's subsample; a streamed audit runs the three
methods and says per finding and per method that they come from a sample of n rows and f
(mitigation: thresholds fitted on the sample); with ``sample_rows`` at least the row count
their findings equal the in-memory audit's; a group the sample makes too small is ``not_run``
with the group and its sizes; and an estimate from the subsample (mitigation's held-out
selection rate of the audited model, a group's selection rate) is unbiased for the full data.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.linear_model import LogisticRegression

import fairengine
from fairengine.config import AuditConfig
from fairengine.roles import ColumnRoles
from fairengine.streaming import stream_counts
from fairengine.streaming.sample import WEIGHT_COLUMN
from fairengine.streaming.self_weighting import kept_rows, self_weighting_subsample

ROW_METHODS = ["fliptest", "individual_fairness", "mitigation"]


def _parts(df: pd.DataFrame, folder: Path, k: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-len(df) // k)
    for i in range(k):
        df.iloc[i * step : (i + 1) * step].to_parquet(folder / f"part-{i:03d}.parquet", index=False)
    return folder


def _round_half_up(x: Fraction) -> int:
    return int((x + Fraction(1, 2)).__floor__())


# ---------------------------------------------------------------------- the subsample's design


def test_kept_rows_is_f_times_the_stratum_rounded_half_up() -> None:
    """m_s = ⌊f N_s + ½⌋ with f = min k_s / N_s, computed here with exact fractions; the
    stratum that sets f keeps all its sampled rows; m_s ≤ k_s; ties at .5 round up."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        rows = rng.integers(1, 5_000, size=rng.integers(1, 9))
        sampled = np.minimum(rows, rng.integers(0, 400))
        f = min(Fraction(int(k), int(n)) for k, n in zip(sampled, rows, strict=True))
        want = [_round_half_up(f * int(n)) for n in rows]
        got = kept_rows(sampled, rows)
        assert got.tolist() == want
        assert (got <= sampled).all()
        j = min(range(len(rows)), key=lambda i: Fraction(int(sampled[i]), int(rows[i])))
        assert got[j] == sampled[j]
    assert kept_rows([2, 3], [4, 5]).tolist() == [2, 3]  # f = 1/2: 5/2 rounds up to 3
    with pytest.raises(Exception, match="sampled <= rows"):
        kept_rows([5], [4])


def _design_table(sizes: dict[tuple[str, int], int], seed: int = 0) -> pd.DataFrame:
    """A table with exactly ``sizes[(group, label)]`` rows per stratum, shuffled, with an id."""
    rng = np.random.default_rng(seed)
    parts = [pd.DataFrame({"g": [g] * n, "y": [y] * n}) for (g, y), n in sizes.items()]
    df = pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=seed)
    df = df.reset_index(drop=True)
    df["score"] = rng.random(len(df))
    df["id"] = np.arange(len(df))
    return df


def test_every_row_is_included_with_its_strata_probability(tmp_path: Path) -> None:
    """Over 400 seeds, each stratum keeps exactly ⌊f N_s + ½⌋ rows every time, and each row's
    inclusion count C_i is Binomial(R, π_s) with π_s = m_s / N_s: the statistic
    Σ_i (C_i − Rπ_s)² / (Rπ_s(1 − π_s)) · (N_s − 1)/N_s, summed over the strata, is
    χ² with Σ (N_s − 1) degrees of freedom (the (N_s − 1)/N_s corrects for the fixed stratum
    size; a multivariate hypergeometric). Sampling that favoured some rows (e.g. the first of
    a file) would put it far out. Also |π_s − f| ≤ 1/(2 N_s)."""
    sizes = {("a", 0): 90, ("a", 1): 70, ("b", 0): 45, ("b", 1): 25, ("c", 0): 13, ("c", 1): 17}
    df = _design_table(sizes)
    folder = _parts(df, tmp_path / "design", k=3)
    roles = ColumnRoles(label="y", protected=("g",), score="score")
    n_total = len(df)
    reps = 400
    included = np.zeros(n_total, dtype=np.int64)
    stratum_of = {k: i for i, k in enumerate(sizes)}
    row_stratum = np.array([stratum_of[(g, y)] for g, y in zip(df["g"], df["y"], strict=True)])
    n_s = np.array(list(sizes.values()))
    for seed in range(reps):
        counts = stream_counts(
            folder, roles, threshold=0.5, batch_rows=100, sample_rows=60,
            sample_columns=["id"], seed=seed,
        )  # fmt: skip
        sub = self_weighting_subsample(counts.sample, "y", files=counts.files)
        strata = sub.strata.set_index(["g", "label"])
        f = min(Fraction(int(k), int(n)) for k, n in zip(strata["sampled"], strata["rows"],
                                                          strict=True))  # fmt: skip
        assert sub.fraction == pytest.approx(float(f), rel=1e-15)
        for (g, y), n in sizes.items():
            assert strata.loc[(g, y), "rows"] == n
            assert strata.loc[(g, y), "kept"] == _round_half_up(f * n)
        got = sub.frame.groupby(["g", "y"]).size()
        assert all(got[key] == strata.loc[key, "kept"] for key in sizes)
        assert sub.in_source_order and sub.frame["id"].is_monotonic_increasing
        assert WEIGHT_COLUMN not in sub.frame
        included[sub.frame["id"].to_numpy()] += 1
    # the strata sizes do not depend on the seed here (L = 10 for every stratum): π_s fixed
    f = Fraction(10, 90)
    m_s = np.array([_round_half_up(f * int(n)) for n in n_s])
    pi = m_s / n_s
    assert (np.abs(pi - float(f)) <= 1 / (2 * n_s) + 1e-15).all()
    stat, dof = 0.0, 0
    for s in range(len(n_s)):
        c = included[row_stratum == s]
        assert c.sum() == reps * m_s[s]
        e = reps * pi[s]
        stat += ((c - e) ** 2).sum() / (e * (1 - pi[s])) * (n_s[s] - 1) / n_s[s]
        dof += n_s[s] - 1
    assert stats.chi2.sf(stat, dof) > 1e-3
    assert stats.chi2.cdf(stat, dof) > 1e-3  # not suspiciously even either


def test_the_dask_reduction_gives_the_streams_subsample(tmp_path: Path) -> None:
    """The Dask engine folds each file in its own task and merges the reservoirs in a tree
    (:func:`fairengine.streaming.dask_engine.merge_folded`); the sampled rows keep their file
    and offset through the merges, so the subsample is the stream's, row for row and in the
    same (file) order."""
    from fairengine.streaming.batches import fold_plan
    from fairengine.streaming.dask_engine import fold_file, merge_folded
    from fairengine.streaming.sources import StreamSource

    sizes = {("a", 0): 900, ("a", 1): 700, ("b", 0): 450, ("b", 1): 250, ("c", 0): 130}
    sizes[("c", 1)] = 170
    folder = _parts(_design_table(sizes, seed=3), tmp_path / "dask", k=5)
    roles = ColumnRoles(label="y", protected=("g",), score="score")
    options = {"threshold": 0.5, "sample_rows": 500, "sample_columns": ["id"], "seed": 9}
    streamed = stream_counts(folder, roles, batch_rows=111, **options)
    plan = fold_plan(roles, **options)
    src = StreamSource(str(folder), batch_rows=111, dictionary_columns=roles.protected)
    expected = src.expected_types(list(plan.columns))
    parts = [fold_file(plan, src, i, expected) for i in range(len(src.fragments))]
    merged = merge_folded(merge_folded(parts[3], parts[0]), merge_folded(parts[4], parts[1]))
    folder_, reservoir, n = merge_folded(merged, parts[2])
    counts = plan.finish(folder_, reservoir, files=src.files, n_batches=n, started=0.0)
    a = self_weighting_subsample(streamed.sample, "y", files=streamed.files)
    b = self_weighting_subsample(counts.sample, "y", files=counts.files)
    assert a.n_rows < len(streamed.sample.frame) < 3_000
    pd.testing.assert_frame_equal(a.frame, b.frame)
    pd.testing.assert_frame_equal(a.strata, b.strata)


# ---------------------------------------------------------------------- unbiased estimates


def test_estimates_from_the_subsample_are_unbiased(tmp_path: Path) -> None:
    """Strata of 4,000, 2,000, 1,000 and 1,000 rows whose scores exceed 0.5 at rates 0.2,
    0.7, 0.1, 0.5: the full data's selection rate is 0.35, while the stratified sample
    (200 rows per stratum) read unweighted averages the strata to 0.375. Over 60 seeds,
    mitigation's held-out selection rate of the audited model (its test split: half of each
    stratum of the subsample, f = 1/20) and group b's selection rate on the subsample have
    means within 4 Monte-Carlo standard errors of the full-data values; the stratified sample's
    unweighted rate is more than 4 standard errors off (the bias the subsample removes)."""
    from fairengine.mitigation import run_mitigation
    from fairengine.mitigation.config import MitigationConfig
    from tasks.stream_data import row_sample

    rates = {("a", 0): 0.2, ("a", 1): 0.7, ("b", 0): 0.1, ("b", 1): 0.5}
    sizes = {("a", 0): 4_000, ("a", 1): 2_000, ("b", 0): 1_000, ("b", 1): 1_000}
    df = _design_table(sizes, seed=1)
    rng = np.random.default_rng(2)
    for key, r in rates.items():  # exactly r · N_s scores above 0.5 per stratum
        idx = np.flatnonzero((df["g"] == key[0]) & (df["y"] == key[1]))
        high = rng.permutation(idx.size) < round(r * idx.size)
        df.loc[idx, "score"] = np.where(
            high, 0.5 + rng.random(idx.size) / 2, rng.random(idx.size) / 2
        )
    folder = _parts(df, tmp_path / "unbiased", k=4)
    full = float((df["score"] > 0.5).mean())
    full_b = float((df.loc[df["g"] == "b", "score"] > 0.5).mean())
    roles = ColumnRoles(label="y", protected=("g",), score="score")
    cfg = AuditConfig.from_dict(
        {"columns": {"label": "y", "protected": ["g"], "score": "score"}, "data": {"path": "x"}}
    )
    mcfg = MitigationConfig(
        enabled=True, compare_fairlearn=False, constraints=["sp"], variants=["overall"]
    )
    held_out, group_b, stratified = [], [], []
    for seed in range(60):
        counts = stream_counts(folder, roles, threshold=0.5, sample_rows=800, seed=seed)
        rows = row_sample(counts, roles, "probability", cfg)
        assert rows.problem is None and rows.subsample.fraction == 1 / 20
        assert rows.dataset.n_rows == 400
        res = run_mitigation(rows.dataset, mcfg, seed=seed)
        assert res.status == "ok", res.reason
        held_out.append(res.details.base.test.selection_rate.estimate)
        frame = rows.subsample.frame
        group_b.append(float((frame.loc[frame["g"] == "b", "score"] > 0.5).mean()))
        stratified.append(float((counts.sample.frame["score"] > 0.5).mean()))

    def off(values: list[float], truth: float) -> float:
        v = np.asarray(values)
        return abs(v.mean() - truth) / (v.std(ddof=1) / np.sqrt(v.size))

    assert off(held_out, full) < 4
    assert off(group_b, full_b) < 4
    assert off(stratified, full) > 4


# ---------------------------------------------------------------------- through the audit


def _table(n: int = 6_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    race = rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1])
    x1 = rng.normal(size=n) + 0.5 * (race == "a")
    x2 = rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(x1 + 0.5 * x2)))).astype(int)
    return pd.DataFrame(
        {"race": race, "sex": rng.choice(["f", "m"], n), "x1": x1, "x2": x2, "y": y}
    )


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return _table()


@pytest.fixture(scope="module")
def parts(table: pd.DataFrame, session_tmp: Path) -> Path:
    return _parts(table, session_tmp / "row-method-parts", k=3)


@pytest.fixture(scope="module")
def model(table: pd.DataFrame) -> LogisticRegression:
    return LogisticRegression().fit(table[["x1", "x2"]], table["y"])


def _settings(session_tmp: Path, model, **extra) -> dict:
    return {
        "label": "y",
        "protected": ["race", "sex"],
        "model": model,
        "features": ["x1", "x2"],
        "methods": ["group_parity", *ROW_METHODS],
        "cache": {"enabled": False},
        "mlflow": {"enabled": False},
        "output": {"dir": str(session_tmp / "row-method-reports")},
        **extra,
    }


def test_a_streamed_audit_runs_the_row_methods_on_the_sample_and_says_so(
    parts, model, session_tmp
) -> None:
    res = fairengine.audit(str(parts), engine="stream", sample_rows=2_000,
                           **_settings(session_tmp, model))  # fmt: skip
    for name in ROW_METHODS:
        m = res.method(name)
        assert m.status == "ok", (name, m.reason)
        sample = m.parameters["sample"]
        assert sample["of_rows"] == 6_000 and 0 < sample["rows"] < 2_000
        note = f"sample of {sample['rows']:,} rows, f = {sample['fraction']:.4g}"
        assert m.findings and all(note in f.label for f in m.findings), name
        assert all("not from all rows" in f.reading for f in m.findings), name
        assert any(f"self-weighting sample of {sample['rows']:,} of 6,000 rows" in w
                   for w in m.warnings), name  # fmt: skip
    assert any("thresholds were fitted from a self-weighting sample" in w
               for w in res.method("mitigation").warnings)  # fmt: skip
    # the count-based method is exact and says nothing of a sample
    assert not any("sample" in f.label for f in res.method("group_parity").findings)
    assert any("FlipTest, individual fairness and mitigation need the rows and run from a "
               "self-weighting sample" in w for w in res.warnings)  # fmt: skip
    # audit.json and the report carry it: labels, warnings and the sample's size per method
    paths = res.save(session_tmp / "row-method-saved")
    data = json.loads(Path(paths["json"]).read_text())
    flip = next(m for m in data["methods"] if m["method"] == "fliptest")
    rows = res.method("fliptest").parameters["sample"]["rows"]
    assert flip["parameters"]["sample"]["rows"] == rows
    assert all(f"sample of {rows:,} rows" in f["label"] for f in flip["findings"])
    html = Path(paths["report"]).read_text()
    assert f"self-weighting sample of {rows:,} of 6,000 rows" in html
    assert "thresholds were fitted from a self-weighting sample" in html


def test_with_every_row_sampled_the_row_methods_equal_the_in_memory_audit(
    table, parts, model, session_tmp
) -> None:
    """sample_rows ≥ the row count: the subsample is the whole table in file order, so
    FlipTest, individual fairness and mitigation see the in-memory audit's rows, model and
    seed: every finding's estimate, interval, p-value and decision is the same (the decisions
    draw FlipTest's further refits from the same dataset)."""
    settings = _settings(session_tmp, model)
    streamed = fairengine.audit(str(parts), engine="stream", sample_rows=10_000, **settings)
    in_memory = fairengine.audit(table, **settings)
    for name in ROW_METHODS:
        a, b = streamed.method(name), in_memory.method(name)
        assert a.status == b.status == "ok", name
        assert a.parameters["sample"]["rows"] == 6_000
        assert [f.key for f in a.findings] == [f.key for f in b.findings], name
        assert len(a.findings) > 1
        for fa, fb in zip(a.findings, b.findings, strict=True):
            assert fa.label == fb.label  # all rows: no sample note on the findings
            assert fa.estimate == fb.estimate or (np.isnan(fa.estimate) and np.isnan(fb.estimate))
            assert fa.pvalue == fb.pvalue and fa.adjusted_pvalue == fb.adjusted_pvalue, fa.key
            assert fa.interval == fb.interval and fa.decision == fb.decision, fa.key
        assert any("on all 6,000 rows" in w for w in a.warnings)
    assert streamed.verdict.status == in_memory.verdict.status


def test_a_group_the_sample_makes_too_small_is_named(parts, model, session_tmp) -> None:
    """race=c has about 600 rows; a self-weighting sample of f ≈ 0.16 keeps about 95 of them,
    below FlipTest's min_group_size of 150: FlipTest is not run, naming the group and both
    sizes. With sample_rows below the number of strata no subsample exists: the row methods
    say so."""
    off = ["group_parity", "group_metrics", "permutation_tests", "intersectional"]
    methods = {
        **dict.fromkeys([*off, "individual_fairness"], False),
        "fliptest": {"min_group_size": 150},
    }
    res = fairengine.audit(
        str(parts), engine="stream", sample_rows=2_000,
        **_settings(session_tmp, model, methods=methods),
    )  # fmt: skip
    flip = res.method("fliptest")
    assert flip.status == "not_run"
    assert "race='c' has" in flip.reason and "in the data" in flip.reason
    assert "below the 150 rows per group it needs; raise data.sample_rows" in flip.reason
    # FlipTest on sex only: race's small group does not stop it
    on_sex = {
        **methods,
        "fliptest": {
            "min_group_size": 150,
            "attributes": ["sex"],
            "n_permutations": 19,
            "n_selfmap": 19,
            "n_bootstrap": 19,
        },
    }
    sex_only = fairengine.audit(
        str(parts), engine="stream", sample_rows=2_000,
        **_settings(session_tmp, model, methods=on_sex),
    )  # fmt: skip
    assert sex_only.method("fliptest").status == "ok", sex_only.method("fliptest").reason
    tiny = fairengine.audit(
        str(parts), engine="stream", sample_rows=5,
        **_settings(session_tmp, model, methods=["fliptest", "mitigation"]),
    )  # fmt: skip
    for name in ("fliptest", "mitigation"):
        m = tiny.method(name)
        assert m.status == "not_run" and "misses a stratum" in m.reason, m.reason
        assert "data.sample_rows 5 is below the 12 protected group × label strata" in m.reason


def test_a_score_column_leaves_the_model_methods_out(parts, table, session_tmp) -> None:
    """Without a model, FlipTest and individual fairness have nothing to query (as in memory);
    mitigation needs only scores and runs on the sample."""
    scored = table.assign(score=1 / (1 + np.exp(-table["x1"])))
    folder = _parts(scored, session_tmp / "row-method-scored", k=3)
    res = fairengine.audit(
        str(folder), engine="stream", sample_rows=2_000,
        **_settings(session_tmp, None, score="score", features=None),
    )  # fmt: skip
    from flows.method_steps import NEEDS_MODEL_REASON

    assert res.method("fliptest").reason == NEEDS_MODEL_REASON
    assert res.method("individual_fairness").reason == NEEDS_MODEL_REASON
    assert res.method("mitigation").status == "ok"


def test_a_streamed_audit_registers_the_rule_fitted_on_the_sample(table, parts, tmp_path) -> None:
    """With ``methods.mitigation.register``, the rule fitted on the self-weighting sample is
    registered after the audit is logged, as for an in-memory audit (the registration's input
    example comes from the sample's rows), and the audit says where the rule was fitted."""
    import mlflow
    from mlflow import MlflowClient

    from flows.audit import audit_flow
    from tasks.settings import default_tracking_uri

    uri = default_tracking_uri()
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    base = LogisticRegression().fit(table[["x1", "x2"]], table["y"])
    exp = client.create_experiment("train-stream-rows", artifact_location=(tmp_path / "a").as_uri())
    with mlflow.start_run(experiment_id=exp):
        info = mlflow.sklearn.log_model(
            base, name="model", registered_model_name="stream-rows",
            pyfunc_predict_fn="predict_proba", pip_requirements=["scikit-learn"],
        )  # fmt: skip
    v1 = str(info.registered_model_version)
    off = {"enabled": False}
    cfg = {
        "data": {"path": str(parts), "engine": "stream", "sample_rows": 3_000},
        "threshold": 0.5,
        "columns": {"label": "y", "protected": ["race", "sex"], "features": ["x1", "x2"]},
        "model": {"uri": f"models:/stream-rows/{v1}"},
        "output": {"dir": str(tmp_path / "out")},
        "mlflow": {"experiment": "t-stream-rows"},
        "cache": {"enabled": False},
        "methods": {
            **{m: off for m in ("group_metrics", "permutation_tests", "intersectional")},
            "individual_fairness": off,
            "mitigation": {
                "enabled": True, "register": True, "register_if": "always",
                "constraints": ["sp"], "variants": ["overall"], "compare_fairlearn": False,
            },
        },
    }  # fmt: skip
    run = audit_flow(cfg)
    mit = run.result.method("mitigation")
    assert mit.status == "ok", mit.reason
    assert 0 < mit.parameters["sample"]["rows"] < 3_000
    assert any("thresholds were fitted from a self-weighting sample" in w for w in mit.warnings)
    new_uri = run.mlflow["mitigated_model_uri"]
    v2 = new_uri.rsplit("/", 1)[1]
    assert int(v2) == int(v1) + 1
    assert client.get_model_version("stream-rows", v2).tags["fairness.mitigation_of"] == v1
    assert run.result.metadata.mitigation_registration.registered


def test_a_cached_rerun_reuses_the_row_methods(parts, model, session_tmp) -> None:
    """With the cache on, a re-run on unchanged files reuses the pass, the count steps and the
    row methods (keyed as the in-memory steps are, by the subsample's content and the model);
    their results still say that they come from the sample."""
    settings = _settings(session_tmp, model)
    settings["cache"] = {"enabled": True, "dir": str(session_tmp / "row-method-cache")}
    first = fairengine.audit(str(parts), engine="stream", sample_rows=2_000, **settings)
    second = fairengine.audit(str(parts), engine="stream", sample_rows=2_000, **settings)
    reused = {k.removesuffix(" (cached)") for k in second.metadata.timings if "(cached)" in k}
    assert set(ROW_METHODS) <= reused, second.metadata.timings
    assert not any("(cached)" in k for k in first.metadata.timings)
    for name in ROW_METHODS:
        a, b = first.method(name), second.method(name)
        assert [f.label for f in a.findings] == [f.label for f in b.findings]
        assert [f.estimate for f in a.findings] == [f.estimate for f in b.findings]
        assert b.parameters["sample"] == a.parameters["sample"]
