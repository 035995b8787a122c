"""The demo: a model trained on embedded data, registered in MLflow, then audited.

Data: the Lipton et al. synthetic hiring data used by FlipTest (Black et al. 2020), generated in
code (:func:`fairengine.datasets.make_lipton_hiring`). The model is an unconstrained logistic
regression on (work experience, hair length); it hires men far more often than women because
work experience differs by gender, so the audit has something to find.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tasks.settings import default_tracking_uri, fairengine_home

DEMO_MODEL_NAME = "fairengine-demo-hiring"
DEMO_EXPERIMENT = "fairengine-demo-models"


@dataclass
class PreparedDemo:
    """The demo's audit config (as a dict and as a file), data file and registered model."""

    config: dict[str, Any]
    config_path: Path
    data_path: Path
    model_uri: str


def prepare_demo(
    n_per_group: int = 5000,
    seed: int = 0,
    progress: Callable[[str], None] = print,
) -> PreparedDemo:
    """Generate the data, train and register the model, write ``audit.yaml`` and the audit CSV.

    Everything goes under ``$FAIRENGINE_HOME/demo`` and the MLflow store of
    :func:`tasks.settings.default_tracking_uri`.
    """
    import mlflow
    from mlflow import MlflowClient
    from sklearn import __version__ as sklearn_version
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from fairengine.datasets import make_lipton_hiring
    from tasks.mlflow_log import ensure_experiment

    if n_per_group < 200:
        raise ValueError(f"--n-per-group must be at least 200, got {n_per_group}")
    home = fairengine_home()
    demo_dir = home / "demo"
    demo_dir.mkdir(parents=True, exist_ok=True)
    data = make_lipton_hiring(n_per_group=n_per_group, seed=seed)
    roles = data.roles
    frame = data.frame
    train, audit = train_test_split(
        frame, test_size=0.5, random_state=seed, stratify=frame[roles.protected[0]]
    )
    features = list(roles.features or ())
    model = LogisticRegression().fit(train[features], train[roles.label])
    progress(f"Trained a logistic regression on {len(train)} rows ({', '.join(features)})")

    tracking_uri = default_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    exp_id = ensure_experiment(client, DEMO_EXPERIMENT, tracking_uri)
    with mlflow.start_run(experiment_id=exp_id, run_name="train-demo-hiring"):
        mlflow.log_params({"model": "LogisticRegression", "n_train": len(train), "seed": seed})
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            registered_model_name=DEMO_MODEL_NAME,
            pyfunc_predict_fn="predict_proba",
            input_example=train[features].head(3),
            pip_requirements=[f"scikit-learn=={sklearn_version}"],
        )
    version = str(info.registered_model_version)
    model_uri = f"models:/{DEMO_MODEL_NAME}/{version}"
    progress(f"Registered {model_uri} in {tracking_uri}")

    data_path = demo_dir / "lipton_hiring_audit.csv"
    audit.to_csv(data_path, index=False)
    config: dict[str, Any] = {
        "name": "demo-hiring",
        "data": {"path": data_path.name},
        "columns": {
            "label": roles.label,
            "protected": list(roles.protected),
            "features": features,
        },
        "model": {"uri": model_uri},
        "score_type": "probability",
        "threshold": 0.5,
        "validation": {"min_group_size": 30},
        "methods": {
            "group_parity": {"tolerance": 0.05, "confidence_level": 0.95},
            # FlipTest on its own paper's data, at its defaults (500 rows per group); the
            # audit's decisions draw more null refits where a flipset's decision is open
            "fliptest": {"enabled": True},
            # RTDP post-processing to equalized odds within e^0.1 between genders, registered
            # as version 2 of the demo model (tagged with this audit) only if the held-out ε's
            # 95 % upper bound is within 0.1 (register_if: upper_bound). The false-positive
            # rates are near 0.02, so their ratio is noisy: without the robust constraint the
            # rule meets 0.1 on the calibration split only (held-out upper bound 0.81 at seed
            # 0); with 50 posterior scenarios it is certified (0.09) at an accuracy cost.
            "mitigation": {
                "enabled": True,
                "constraints": ["eo"],
                "epsilon": 0.1,
                "robust_draws": 50,
                "register": True,
                "register_if": "upper_bound",
            },
        },
        "alpha": 0.05,
        "multiplicity": "maxt",
        "seed": seed,
    }
    config_path = demo_dir / "audit.yaml"
    header = (
        "# FairEngine demo audit (written by `fairengine demo`); edit and re-run with\n"
        f"#   fairengine audit --config {config_path}\n"
        "# Every key and its default: README.md, 'Configuration reference'.\n"
    )
    config_path.write_text(header + yaml.safe_dump(config, sort_keys=False))
    progress(f"Wrote {data_path} ({len(audit)} rows) and {config_path}")
    return PreparedDemo(
        config=config, config_path=config_path, data_path=data_path, model_uri=model_uri
    )
