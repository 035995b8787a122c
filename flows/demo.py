"""The demo: a model trained on embedded data, registered in MLflow, then audited.

Data: the Lipton et al. synthetic hiring data used by FlipTest (Black et al. 2020), generated in
code (:func:`fairengine.datasets.make_lipton_hiring`). The model is an unconstrained logistic
regression on (work experience, hair length); it hires men far more often than women because
work experience differs by gender, so the audit has something to find.

``fairengine demo --task regression|multiclass|ranking`` (:func:`prepare_task_demo`): the
proxy-shift example of that task (:func:`fairengine.datasets.make_proxy_shift`: a proxy feature
that under-rates group B), a scikit-learn model (linear regression; multinomial logistic
regression; a logistic regression of relevance whose probability ranks the items) logged with
``mlflow.sklearn.log_model``'s defaults, registered and audited with the task's method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
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


def _register(
    model: Any,
    name: str,
    run_name: str,
    train_features: Any,
    params: dict[str, Any],
    progress: Callable[[str], None],
    pyfunc_predict_fn: str | None = None,
) -> str:
    """Log ``model`` with ``mlflow.sklearn.log_model`` in the demo experiment, register it as
    ``name`` and return its ``models:/name/<version>`` URI."""
    import mlflow
    from mlflow import MlflowClient
    from sklearn import __version__ as sklearn_version

    from tasks.mlflow_log import ensure_experiment

    tracking_uri = default_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    exp_id = ensure_experiment(client, DEMO_EXPERIMENT, tracking_uri)
    extra = {} if pyfunc_predict_fn is None else {"pyfunc_predict_fn": pyfunc_predict_fn}
    with mlflow.start_run(experiment_id=exp_id, run_name=run_name):
        mlflow.log_params(params)
        info = mlflow.sklearn.log_model(
            model,
            name="model",
            registered_model_name=name,
            input_example=train_features.head(3),
            pip_requirements=[f"scikit-learn=={sklearn_version}"],
            **extra,
        )
    model_uri = f"models:/{name}/{info.registered_model_version}"
    progress(f"Registered {model_uri} in {tracking_uri}")
    return model_uri


def prepare_demo(
    n_per_group: int = 5000,
    seed: int = 0,
    progress: Callable[[str], None] = print,
) -> PreparedDemo:
    """Generate the data, train and register the model, write ``audit.yaml`` and the audit CSV.

    Everything goes under ``$FAIRENGINE_HOME/demo`` and the MLflow store of
    :func:`tasks.settings.default_tracking_uri`.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from fairengine.datasets import make_lipton_hiring

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

    model_uri = _register(
        model,
        DEMO_MODEL_NAME,
        "train-demo-hiring",
        train[features],
        {"model": "LogisticRegression", "n_train": len(train), "seed": seed},
        progress,
        pyfunc_predict_fn="predict_proba",
    )

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
            # the worst subgroup of gender x work experience x hair length (binned), with a
            # p-value calibrated for the search (the model's scores are held out: fitted on
            # the other half of the rows); one decision (top_k 1): every further test in the
            # family makes the FlipTest decisions need more refits than max_null_refits allows
            "subgroup_scan": {"enabled": True, "features": features, "levels": 4, "top_k": 1},
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


def prepare_task_demo(
    task: str,
    n: int = 8000,
    seed: int = 0,
    progress: Callable[[str], None] = print,
) -> PreparedDemo:
    """The demo of a non-binary ``task`` (module docstring): half the ``n`` rows train the model
    (for a ranking: half the lists), the other half are audited; ``audit.yaml`` names the task,
    the roles and the registered model, under ``$FAIRENGINE_HOME/demo-<task>``."""
    from sklearn.linear_model import LinearRegression, LogisticRegression

    from fairengine.datasets import make_proxy_shift

    if n < 400:
        raise ValueError(f"--rows must be at least 400 for a {task} demo, got {n}")
    data = make_proxy_shift(task, n=n, seed=seed)
    roles, frame = data.roles, data.frame
    features = list(roles.features or ())
    label = roles.label
    assert label is not None
    if task == "ranking":  # whole lists on each side
        in_train = (frame["query"] % 2 == 0).to_numpy()
    else:
        in_train = (
            np.random.default_rng([seed, 1]).random(len(frame)) < 0.5
        )  # not the data's stream
    train, audit = frame[in_train], frame[~in_train]
    model: Any
    if task == "regression":
        model = LinearRegression().fit(train[features], train[label])
        what = "a linear regression"
    elif task == "multiclass":
        model = LogisticRegression(max_iter=500).fit(train[features], train[label])
        what = "a multinomial logistic regression"
    else:
        model = LogisticRegression().fit(train[features], train[label])
        what = "a logistic regression of relevance (its probability ranks the items)"
    progress(f"Trained {what} on {len(train)} rows ({', '.join(features)})")
    model_uri = _register(
        model,
        f"fairengine-demo-{task}",
        f"train-demo-{task}",
        train[features],
        {"model": type(model).__name__, "n_train": len(train), "seed": seed, "task": task},
        progress,
    )
    demo_dir = fairengine_home() / f"demo-{task}"
    demo_dir.mkdir(parents=True, exist_ok=True)
    data_path = demo_dir / f"proxy_shift_{task}_audit.csv"
    audit.to_csv(data_path, index=False)
    columns: dict[str, Any] = {
        "label": label,
        "protected": list(roles.protected),
        "features": features,
    }
    if roles.list_id is not None:
        columns["list_id"] = roles.list_id
    config: dict[str, Any] = {
        "name": f"demo-{task}",
        "task": task,
        "data": {"path": data_path.name},
        "columns": columns,
        "model": {"uri": model_uri},
        "alpha": 0.05,
        "multiplicity": "maxt",
        "seed": seed,
    }
    config_path = demo_dir / "audit.yaml"
    header = (
        f"# FairEngine {task} demo audit (written by `fairengine demo --task {task}`); edit and "
        f"re-run with\n#   fairengine audit --config {config_path}\n"
        f"# The data: {data.description}\n"
    )
    config_path.write_text(header + yaml.safe_dump(config, sort_keys=False))
    progress(f"Wrote {data_path} ({len(audit)} rows) and {config_path}")
    return PreparedDemo(
        config=config, config_path=config_path, data_path=data_path, model_uri=model_uri
    )
