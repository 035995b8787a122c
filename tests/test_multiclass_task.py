"""``task: multiclass`` end to end (issue "Beyond binary classifiers", multiclass part): the
config's task, the multiclass data contract (classes from the label; predicted classes the
label never takes are errors), the registry's "not applicable" listing, the method through the
flow on COMPAS ``score_text`` (Low / Medium / High) and with a model object, and its resampler
for the sequential decisions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

import fairengine
from fairengine.config import AuditConfig
from fairengine.dataset import AuditDataset
from fairengine.errors import ConfigError, DataContractError
from fairengine.group_pairs import pair_seed
from fairengine.multiclass.config import MulticlassConfig
from fairengine.multiclass.findings import multiclass_findings
from fairengine.multiclass.method import run_multiclass_metrics
from fairengine.multiclass.permutation import pair_permutation_tests
from fairengine.multiclass.resampler import MulticlassResampler
from fairengine.registry import METHODS
from fairengine.roles import ColumnRoles

COMPAS = Path(__file__).resolve().parents[2] / "shared" / "data" / "compas"
OUTCOMES = ["Low", "Medium", "High"]


def _compas() -> pd.DataFrame:
    """ProPublica's rows; truth: no recidivism in two years (Low), non-violent recidivism
    (Medium), violent recidivism (High); race with Asian, Native American and Other merged."""
    df = pd.read_csv(COMPAS / "compas-scores-two-years.csv.gz", usecols=[
        "race", "sex", "score_text", "two_year_recid", "is_violent_recid",
        "days_b_screening_arrest", "is_recid", "c_charge_degree",
    ])  # fmt: skip
    df = df[
        df.days_b_screening_arrest.between(-30, 30)
        & (df.is_recid != -1)
        & (df.c_charge_degree != "O")
        & (df.score_text != "N/A")
    ]
    truth = np.where(
        df.two_year_recid == 1, np.where(df.is_violent_recid == 1, "High", "Medium"), "Low"
    )
    race = df.race.where(df.race.isin(["African-American", "Caucasian", "Hispanic"]), "Other")
    return pd.DataFrame(
        {"truth": truth, "score_text": df.score_text.to_numpy(), "race": race, "sex": df.sex}
    ).reset_index(drop=True)


def test_multiclass_replaces_the_binary_defaults() -> None:
    cfg = AuditConfig.from_dict({"task": "multiclass"})
    assert (cfg.score_type, cfg.threshold) == ("class", None)
    with pytest.raises(ConfigError) as err:
        AuditConfig.from_dict({"task": "multiclass", "threshold": 0.5})
    assert "threshold: binary-classifier setting(s) given with task: multiclass" in str(err.value)
    with pytest.raises(ConfigError) as err:
        AuditConfig.from_dict({"score_type": "class"})
    assert "score_type 'class' is the prediction of a multiclass model" in str(err.value)
    with pytest.raises(ConfigError) as err:
        AuditConfig.from_dict({"task": "multiclass", "methods": {"multiclass_metrics": {
            "metrics": ["precision"]}}})  # fmt: skip
    assert "methods.multiclass_metrics.metrics must list some of" in str(err.value)


def test_predicted_classes_must_be_classes_of_the_label() -> None:
    df = pd.DataFrame({"y": ["a", "b", "c"] * 20, "p": ["a", "b", "d"] * 20, "g": ["x", "y"] * 30})
    roles = ColumnRoles(label="y", protected=("g",), score="p")
    with pytest.raises(DataContractError) as err:
        AuditDataset.from_frame(df, roles, task="multiclass")
    assert "score column 'p' predicts class(es) ['d'] that the label column 'y' never takes" in (
        str(err.value)
    )
    ok = AuditDataset.from_frame(df.assign(p=df.y), roles, task="multiclass")
    assert ok.classes == ("a", "b", "c") and ok.summary()["classes"] == ["a", "b", "c"]
    with pytest.raises(DataContractError, match="has a single class"):
        AuditDataset.from_frame(df.assign(y="a", p="a"), roles, task="multiclass")


@pytest.fixture(scope="module")
def compas_audit(session_tmp: Path) -> fairengine.AuditResult:
    return fairengine.audit(
        _compas(), label="truth", protected=["race", "sex"], score="score_text",
        task="multiclass", output={"dir": str(session_tmp / "multiclass-reports")},
    )  # fmt: skip


def test_compas_score_text_by_race_and_sex(compas_audit) -> None:
    status = {m.method: m.status for m in compas_audit.methods}
    assert status["multiclass_metrics"] == "ok"
    assert all(status[m.name] == "not_run" for m in METHODS if m.name != "multiclass_metrics")
    found = {f.key: f for f in compas_audit.findings()}
    df = _compas()
    aa = df[df.race == "African-American"]
    share = (aa.score_text == "High").mean()
    assert found["mc_group_selection.High.race.African-American"].estimate == pytest.approx(
        share, abs=1e-12
    )
    # predicted High: 0.266 of African-American vs 0.106 of Caucasian defendants
    gap = found["mc_selection.High.race.African-American_Caucasian"]
    assert gap.estimate == pytest.approx(0.160, abs=0.001) and gap.decision == "reject"
    assert found["mc_tv.race.African-American_Caucasian"].decision == "reject"
    # the TPR of Medium does not differ (0.335 vs 0.324)
    assert found["mc_tpr.Medium.race.African-American_Caucasian"].decision != "reject"
    assert compas_audit.verdict.status == "fail"
    assert compas_audit.dataset.task == "multiclass"
    html = compas_audit.html()
    assert "Not applicable to a multiclass audit (defined for" in html
    assert "classes (multiclass)" in html


def test_the_resampler_continues_each_pair_on_its_own_stream() -> None:
    df = _compas().iloc[:1500]
    ds = AuditDataset.from_frame(
        df, ColumnRoles(label="truth", protected=("sex", "race"), score="score_text"),
        task="multiclass",
    )  # fmt: skip
    cfg = MulticlassConfig(n_permutations=99)
    res = run_multiclass_metrics(ds, cfg, seed=5)
    tested = [f.key for f in res.findings if f.pvalue is not None and f.resampling]
    sampler = MulticlassResampler(ds, cfg, seed=5)
    assert tested and all(sampler.can_extend(k) for k in tested)
    assert not sampler.can_extend("mc_epsilon.sex")
    enc = ds.groups["race"]  # the second attribute: its first pair is stream 1
    direct = pair_permutation_tests(
        ds.label, ds.prediction, enc.codes.astype(np.intp), enc.categories, ds.classes,
        group_a=0, group_b=1, n_permutations=40, seed=pair_seed(5, 1, 99), attribute="race",
    )  # fmt: skip
    expected = {f.key: f.resampling[0].exceedances for f in multiclass_findings(pairs=(direct,))
                if f.resampling}  # fmt: skip
    key = next(iter(expected))
    assert sampler.draw(key, "permutation", 99, 40) == expected[key]


def test_a_model_object_predicts_the_classes(session_tmp: Path) -> None:
    rng = np.random.default_rng(2)
    n = 900
    x = rng.normal(size=(n, 2))
    g = rng.choice(["u", "v"], n)
    y = np.array(OUTCOMES)[
        np.digitize(x[:, 0] + 0.5 * (g == "u") + rng.normal(0, 0.5, n), [-0.5, 0.5])
    ]
    df = pd.DataFrame({"x0": x[:, 0], "x1": x[:, 1], "g": g, "y": y})
    model = LogisticRegression(max_iter=500).fit(df[["x0", "x1"]], df["y"])
    res = fairengine.audit(
        df, label="y", protected=["g"], model=model, task="multiclass",
        methods={"multiclass_metrics": {"n_permutations": 99}},
        output={"dir": str(session_tmp / "multiclass-model")},
    )  # fmt: skip
    assert "one predicted class per row (multiclass)" in (res.model.score_description or "")
    predicted = model.predict(df[["x0", "x1"]])
    u = predicted[df.g.to_numpy() == "u"]
    got = {f.key: f.estimate for f in res.findings()}
    assert got["mc_group_selection.High.g.u"] == pytest.approx((u == "High").mean(), abs=1e-12)
