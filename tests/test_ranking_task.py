"""``task: ranking`` end to end (issue "Beyond binary classifiers", ranking part): the config's
task and its optional relevance label and list-id column, the ranking data contract, the
method through the flow on the law-school applicants ranked by a regression model's predicted
first-year grade (checked against a brute-force computation), lists with relevance, a
classifier ranking by its probabilities, and the resampler of the sequential decisions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

import fairengine
from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError
from fairengine.group_pairs import pair_seed
from fairengine.ranking.config import RankingConfig
from fairengine.ranking.findings import ranking_findings
from fairengine.ranking.method import pair_tests, run_ranking_metrics
from fairengine.ranking.resampler import RankingResampler
from fairengine.registry import METHODS
from fairengine.roles import ColumnRoles

LAW = Path(__file__).resolve().parents[2] / "shared" / "data" / "law_school" / "law_data.csv.gz"


def _law() -> pd.DataFrame:
    df = pd.read_csv(LAW, usecols=["race", "sex", "LSAT", "UGPA", "ZFYA", "first_pf"])
    df["sex"] = df["sex"].map({1: "female", 2: "male"})
    return df


def _lists(n_lists: int = 60, size: int = 30, seed: int = 0) -> pd.DataFrame:
    """Queries of ``size`` items; group B's scores shifted down by 0.5 in every list."""
    rng = np.random.default_rng(seed)
    n = n_lists * size
    group = rng.choice(["A", "B"], size=n)
    score = rng.normal(size=n) - 0.5 * (group == "B")
    return pd.DataFrame({
        "query": np.repeat([f"q{i}" for i in range(n_lists)], size),
        "group": group,
        "score": score,
        "clicked": (score + rng.normal(size=n) > 0.5).astype(int),
    })  # fmt: skip


# ----------------------------------------------------------------------------- config
def test_ranking_replaces_the_binary_defaults_and_needs_no_label() -> None:
    cfg = AuditConfig.from_dict(
        {"task": "ranking", "columns": {"protected": ["race"], "score": "s", "list_id": "q"}}
    )
    assert (cfg.task, cfg.score_type, cfg.threshold) == ("ranking", "value", None)
    roles = cfg.roles()
    assert roles.label is None and roles.list_id == "q" and "q" in roles.role_columns()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"task": "ranking", "threshold": 0.5}, "threshold: binary-classifier setting(s)"),
        ({"task": "ranking", "methods": {"ranking_metrics": {"k": [1.5]}}},
         "methods.ranking_metrics.k must list top-k cutoffs"),
        ({"task": "ranking", "methods": {"ranking_metrics": {"ties": "random"}}},
         "methods.ranking_metrics.ties must be one of ['order', 'error']"),
        ({"task": "ranking", "methods": {"ranking_metrics": {"alternative": "up"}}},
         "methods.ranking_metrics.alternative must be 'two-sided', 'greater' or 'less'"),
    ],
)  # fmt: skip
def test_bad_ranking_settings_are_clear_errors(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        AuditConfig.from_dict(raw)
    assert message in str(err.value)


def test_a_list_id_or_a_missing_label_outside_ranking_is_an_error() -> None:
    cfg = AuditConfig.from_dict({"columns": {"label": "y", "protected": ["g"], "list_id": "q"}})
    with pytest.raises(ConfigError, match=r"columns.list_id \('q'\) applies to task: ranking"):
        cfg.roles()
    with pytest.raises(ConfigError, match=r"columns\.label is required"):
        AuditConfig.from_dict({"columns": {"protected": ["g"]}}).roles()
    df = pd.DataFrame({"g": ["a", "b"] * 5, "s": np.arange(10.0)})
    with pytest.raises(DataContractError, match="a regression audit needs a label column"):
        AuditDataset.from_frame(df, ColumnRoles(None, ("g",), score="s"), task="regression")


# ----------------------------------------------------------------------------- data contract
def test_the_ranking_dataset_keeps_scores_lists_and_relevance() -> None:
    df = _lists(4, 10)
    roles = ColumnRoles(label="clicked", protected=("group",), score="score", list_id="query")
    ds = AuditDataset.from_frame(df, roles, task="ranking")
    assert ds.task == "ranking" and ds.probability is None and ds.threshold is None
    np.testing.assert_array_equal(ds.prediction, df["score"].to_numpy())
    np.testing.assert_array_equal(ds.relevance, df["clicked"].to_numpy(dtype=float))
    assert ds.summary()["n_lists"] == 4 and ds.summary()["label_rate"] == df.clicked.mean()
    bare = AuditDataset.from_frame(df, ColumnRoles(None, ("group",), score="score"), task="ranking")
    assert bare.relevance is None and bare.lists is None
    assert bare.summary()["label_rate"] is None and bare.summary()["n_lists"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"clicked": -1.0}, "label column 'clicked' (the relevance of a ranking audit) has 1 "
                            "missing, infinite or negative value(s)"),
        ({"clicked": np.nan}, "label column 'clicked' (the relevance of a ranking audit) has 1"),
        ({"query": None}, "list-id column 'query' has 1 missing value(s) (first at row 3)"),
        ({"score": np.inf}, "score column 'score'"),
    ],
)  # fmt: skip
def test_bad_ranking_data_names_the_column(change: dict, message: str) -> None:
    df = _lists(4, 10)
    df[list(change)] = df[list(change)].astype(object)
    for col, value in change.items():
        df.loc[3, col] = value
        if col != "query":
            df[col] = pd.to_numeric(df[col])
    roles = ColumnRoles(label="clicked", protected=("group",), score="score", list_id="query")
    with pytest.raises(DataContractError) as err:
        AuditDataset.from_frame(df, roles, task="ranking")
    assert message in str(err.value)


# ----------------------------------------------------------------------------- the flow
@pytest.fixture(scope="module")
def law_audit(session_tmp: Path) -> fairengine.AuditResult:
    law = _law()
    lr = LinearRegression().fit(law[["LSAT", "UGPA"]], law["ZFYA"])
    return fairengine.audit(
        law[["LSAT", "UGPA", "race", "sex"]], protected=["race", "sex"], model=lr,
        features=["LSAT", "UGPA"], task="ranking",
        output={"dir": str(session_tmp / "ranking-reports")},
    )  # fmt: skip


def test_law_school_ranked_by_predicted_grade(law_audit) -> None:
    status = {m.method: m.status for m in law_audit.methods}
    assert status["ranking_metrics"] == "ok"
    assert all(status[m.name] == "not_run" for m in METHODS if m.name != "ranking_metrics")
    found = {f.key: f for f in law_audit.findings()}
    # brute force: rank by the model's prediction (ties by row order), top 10% = 2,180 items
    law = _law()
    pred = LinearRegression().fit(law[["LSAT", "UGPA"]], law["ZFYA"]).predict(law[["LSAT", "UGPA"]])
    order = np.argsort(-pred, kind="stable")
    rank = np.empty(len(law), dtype=np.int64)
    rank[order] = np.arange(1, len(law) + 1)
    k = int(np.ceil(0.1 * len(law)))
    top = rank <= k
    black, white = (law.race == "Black").to_numpy(), (law.race == "White").to_numpy()
    assert found["rank_topk_share_10pct.race.Black"].estimate == pytest.approx(
        top[black].sum() / k, abs=1e-12
    )
    exposure = 1 / np.log2(1 + rank)
    assert found["rank_group_exposure.race.White"].estimate == pytest.approx(
        exposure[white].mean(), abs=1e-12
    )
    gap = found["rank_topk_rate_20pct.race.Black_White"]
    top20 = rank <= int(np.ceil(0.2 * len(law)))
    assert gap.estimate == pytest.approx(top20[black].mean() - top20[white].mean(), abs=1e-12)
    assert gap.decision == "reject" and gap.estimate < -0.2
    assert law_audit.verdict.status == "fail" and law_audit.dataset.task == "ranking"
    html = law_audit.html()
    assert "Not applicable to a ranking audit (defined for" in html
    assert "ranking scores" in html and "values (regression)" not in html


def test_lists_with_relevance_through_the_flow(session_tmp: Path) -> None:
    df = _lists()
    res = fairengine.audit(
        df, label="clicked", protected="group", score="score", list_id="query", task="ranking",
        methods={"ranking_metrics": {"k": [5, 0.5], "n_permutations": 499}},
        output={"dir": str(session_tmp / "ranking-lists")},
    )  # fmt: skip
    found = {f.key: f for f in res.findings()}
    assert found["rank_exposure.group.A_B"].decision == "reject"
    assert found["rank_topk_rate_k5.group.A_B"].estimate > 0
    assert "rank_precision_k5.group.A" in found and "rank_dtr.group.A_B" in found
    assert res.dataset.roles.list_id == "query"


def test_a_classifier_ranks_by_its_probabilities(session_tmp: Path) -> None:
    law = _law().sample(3000, random_state=1).reset_index(drop=True)
    clf = LogisticRegression().fit(law[["LSAT", "UGPA"]], law["first_pf"])
    res = fairengine.audit(
        law[["LSAT", "UGPA", "sex"]], protected="sex", model=clf, features=["LSAT", "UGPA"],
        task="ranking", methods={"ranking_metrics": {"n_permutations": 199}},
        output={"dir": str(session_tmp / "ranking-classifier")},
    )  # fmt: skip
    assert "predict_proba" in res.model.score_source["description"]
    assert any(f.key.startswith("rank_exposure.sex.") and f.pvalue for f in res.findings())


def test_the_resampler_continues_each_pair_on_its_own_stream() -> None:
    df = _lists(20, 12).assign(region=lambda d: np.where(d.index % 3 == 0, "n", "s"))
    roles = ColumnRoles(None, ("group", "region"), score="score", list_id="query")
    ds = AuditDataset.from_frame(df, roles, task="ranking")
    cfg = RankingConfig(n_permutations=99, k=[3])
    res = run_ranking_metrics(ds, cfg, seed=5)
    tested = [f.key for f in res.findings if f.pvalue is not None and f.resampling]
    sampler = RankingResampler(ds, cfg, seed=5)
    assert len(tested) == 4 and all(sampler.can_extend(k) for k in tested)
    assert not sampler.can_extend("rank_exposure_ratio.group.A_B")
    enc = ds.groups["region"]  # the second attribute: its first pair is stream 1
    a, b = (0, 1) if enc.sizes()[0] >= enc.sizes()[1] else (1, 0)
    direct = pair_tests(
        ds, cfg, "region", enc.codes.astype(np.intp), *sorted((a, b)), n_permutations=40,
        seed=pair_seed(5, 1, 99),
    )  # fmt: skip
    expected = {
        f.key: f.resampling[0].exceedances
        for f in ranking_findings(pairs=(direct,))
        if f.resampling
    }
    key = next(k for k in expected if k.startswith("rank_topk_rate_k3.region."))
    assert sampler.draw(key, "permutation", 99, 40) == expected[key]


def test_a_single_item_list_is_named_before_the_audit_runs() -> None:
    df = _lists(4, 10)
    df.loc[len(df)] = {"query": "lonely", "group": "A", "score": 0.3, "clicked": 0}
    roles = ColumnRoles(label="clicked", protected=("group",), score="score", list_id="query")
    with pytest.raises(DataContractError) as err:
        AuditDataset.from_frame(df, roles, task="ranking")
    assert "list-id column 'query': 1 list(s) hold a single item ('lonely')" in str(err.value)
