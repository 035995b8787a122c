"""``device: auto`` and its resolution (:mod:`fairengine.devices`) in the three torch paths.

CI has no GPU: the CUDA branches are tested by mocking ``torch.cuda.is_available`` (and
``device_count``); no CUDA kernel runs here. The CPU paths run for real.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from fairengine.dataset import AuditDataset
from fairengine.datasets import make_lipton_hiring, make_maity_simulation
from fairengine.devices import check_device, cuda_available, resolve_device
from fairengine.errors import ConfigError
from fairengine.fliptest import FlipTestConfig, run_fliptest
from fairengine.fliptest.method import make_estimator, map_device
from fairengine.individual import IndividualConfig, run_individual_fairness
from fairengine.individual.attack import resolve_device as attack_device
from fairengine.individual.result import IndividualFairnessDetails
from fairengine.permutation import PermutationConfig, permutation_test, run_permutation_tests
from fairengine.permutation.config import resolve_backend
from fairengine.permutation.result import PermutationDetails
from fairengine.roles import ColumnRoles


@pytest.fixture()
def gpus(monkeypatch: pytest.MonkeyPatch):
    """``gpus(n)`` makes torch report ``n`` CUDA devices (0: none)."""

    def set_count(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)

    return set_count


# ----------------------------------------------------------------------------- the module


@pytest.mark.parametrize("value", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_check_device_accepts(value: str) -> None:
    check_device(value, "methods.x.device")


@pytest.mark.parametrize("value", ["gpu", "CUDA", "cuda:", "cuda:a", "mps", "", None, 0])
def test_check_device_names_the_key_and_the_values(value: object) -> None:
    with pytest.raises(ConfigError, match=r"methods\.x\.device must be 'auto'.*'cpu'.*'cuda'"):
        check_device(value, "methods.x.device")


def test_auto_is_cuda_when_available_else_cpu(gpus) -> None:
    gpus(0)
    assert resolve_device("auto") == resolve_device(None) == "cpu"
    assert not cuda_available()
    gpus(1)
    assert resolve_device("auto") == resolve_device(None) == "cuda"
    assert cuda_available()


def test_explicit_devices(gpus) -> None:
    gpus(2)
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("cuda") == "cuda"
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(ConfigError, match=r"methods\.x\.device is 'cuda:2'.*2 CUDA device"):
        resolve_device("cuda:2", "methods.x.device")
    gpus(0)
    assert resolve_device("cpu") == "cpu"
    for value in ("cuda", "cuda:0"):
        with pytest.raises(ConfigError, match=r"methods\.x\.device is .*no CUDA device.*'auto'"):
            resolve_device(value, "methods.x.device")


def test_attack_resolves_through_the_module(gpus) -> None:
    gpus(0)
    assert attack_device("auto") == attack_device(None) == torch.device("cpu")
    with pytest.raises(ConfigError, match="no CUDA device"):
        attack_device("cuda")
    gpus(1)
    assert attack_device("auto") == torch.device("cuda")
    assert attack_device(torch.device("cpu")) == torch.device("cpu")


# ----------------------------------------------------------------------------- configs


def test_defaults_are_auto() -> None:
    assert FlipTestConfig().device == "auto"
    assert IndividualConfig().device == "auto"
    perm = PermutationConfig()
    assert (perm.backend, perm.device) == ("auto", "auto")
    assert PermutationConfig(device=None).device is None  # the former default: also auto


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (lambda: FlipTestConfig(device="gpu"), r"methods\.fliptest\.device"),
        (lambda: IndividualConfig(device="gpu"), r"methods\.individual_fairness\.device"),
        (lambda: PermutationConfig(device="gpu"), r"methods\.permutation_tests\.device"),
    ],
)
def test_bad_device_names_the_key(make, key: str) -> None:
    with pytest.raises(ConfigError, match=key + r" must be 'auto'"):
        make()


def test_config_accepts_cuda_without_a_gpu(gpus) -> None:
    """Validation does not look for a GPU (a config may be checked on another machine)."""
    gpus(0)
    assert FlipTestConfig(device="cuda:1").device == "cuda:1"
    assert IndividualConfig(device="cuda").device == "cuda"
    assert PermutationConfig(backend="torch", device="cuda").device == "cuda"


# ----------------------------------------------------------------------------- FlipTest


def test_fliptest_map_device(gpus) -> None:
    gpus(1)
    # auto: entropic problems up to 2,000 a side stay on the CPU's numpy loop (faster there)
    assert map_device(FlipTestConfig()) == "cpu"
    assert map_device(FlipTestConfig(max_per_group=2000)) == "cpu"
    assert map_device(FlipTestConfig(max_per_group=2001)) == "cuda"
    assert map_device(FlipTestConfig(device="cuda")) == "cuda"
    big = FlipTestConfig(max_per_group=5000)
    assert make_estimator(big, seed=0).get_params()["device"] == "cuda"
    gan = make_estimator(FlipTestConfig(estimator="gan"), seed=0)
    assert gan.get_params()["device"] == "cuda"
    assert map_device(FlipTestConfig(device="cpu")) == "cpu"
    gpus(0)
    assert map_device(FlipTestConfig()) == "cpu"
    assert make_estimator(FlipTestConfig(), seed=0).get_params()["device"] == "cpu"
    # the numpy maps run on the CPU whatever the setting
    assert map_device(FlipTestConfig(estimator="exact", device="cuda")) == "cpu"
    with pytest.raises(ConfigError, match=r"methods\.fliptest\.device is 'cuda'"):
        map_device(FlipTestConfig(device="cuda"))


def _lipton() -> AuditDataset:
    ds = make_lipton_hiring(300)
    return AuditDataset.from_frame(ds.frame, ds.roles)


def _hire_proba(df: pd.DataFrame) -> np.ndarray:
    z = 1.4028 * df["work_exp"].to_numpy() + 1.1688 * df["hair_len"].to_numpy() - 0.8684
    return 1 / (1 + np.exp(-40 * z))


def test_fliptest_records_the_device_and_fails_loudly(gpus) -> None:
    gpus(0)
    cfg = FlipTestConfig(
        enabled=True, epsilon=0.03, n_permutations=2, n_selfmap=2, n_bootstrap=2,
        max_per_group=100, validate=False,
    )  # fmt: skip
    res = run_fliptest(_lipton(), cfg, seed=1, predict_proba=_hire_proba)
    assert res.status == "ok"
    assert (res.parameters["device"], res.parameters["device_requested"]) == ("cpu", "auto")
    cfg.device = "cuda"
    with pytest.raises(ConfigError, match=r"methods\.fliptest\.device is 'cuda'"):
        run_fliptest(_lipton(), cfg, seed=1, predict_proba=_hire_proba)


# ----------------------------------------------------------------------------- individual


def test_individual_records_the_device_and_fails_loudly(gpus) -> None:
    gpus(0)
    data = make_maity_simulation(n=100, seed=1)
    ds = AuditDataset.from_frame(data.frame, data.roles)
    model = LogisticRegression().fit(data.frame[["x1", "x2"]], data.frame["y"])
    res = run_individual_fairness(ds, IndividualConfig(steps=5, num_threads=1), model=model)
    assert res.status == "ok", res.reason
    assert (res.parameters["device"], res.parameters["device_requested"]) == ("cpu", "auto")
    assert isinstance(res.details, IndividualFairnessDetails)
    assert res.details.attack.device == "cpu"
    with pytest.raises(ConfigError, match=r"methods\.individual_fairness\.device is 'cuda'"):
        run_individual_fairness(ds, IndividualConfig(steps=5, device="cuda"), model=model)


# ----------------------------------------------------------------------------- permutation


@pytest.mark.parametrize(
    ("n_gpus", "backend", "device", "expected"),
    [
        (1, "auto", "auto", ("torch", "cuda")),  # the GPU by default when there is one
        (0, "auto", "auto", ("numpy", "cpu")),  # numpy: the fast path on a CPU
        (0, "auto", None, ("numpy", "cpu")),
        (2, "auto", "cuda:1", ("torch", "cuda:1")),
        (1, "auto", "cpu", ("numpy", "cpu")),
        (1, "torch", "auto", ("torch", "cuda")),
        (0, "torch", "auto", ("torch", "cpu")),
        (1, "torch", "cpu", ("torch", "cpu")),
        (1, "numpy", "auto", ("numpy", "cpu")),
        (0, "numpy", "cuda", ("numpy", "cpu")),  # numpy ignores the device
    ],
)
def test_permutation_backend_resolution(gpus, n_gpus, backend, device, expected) -> None:
    gpus(n_gpus)
    assert resolve_backend(PermutationConfig(backend=backend, device=device)) == expected


def test_permutation_cuda_without_a_gpu_is_a_config_error(gpus) -> None:
    gpus(0)
    for backend in ("auto", "torch"):
        with pytest.raises(ConfigError, match=r"methods\.permutation_tests\.device is 'cuda'"):
            resolve_backend(PermutationConfig(backend=backend, device="cuda"))
    rng = np.random.default_rng(0)
    y, s = rng.integers(0, 2, 200), rng.random(200)
    g = np.arange(200) % 2 == 0
    with pytest.raises(ConfigError, match="no CUDA device"):
        permutation_test(y, s, g, metric="auc", backend="torch", device="cuda")


def _scored() -> AuditDataset:
    rng = np.random.default_rng(2)
    n = 400
    y = rng.binomial(1, 0.4, n)
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["f", "m"], n),
            "y": y,
            "s": np.clip(rng.normal(0.3 + 0.3 * y, 0.2), 0, 1),
        }
    )
    return AuditDataset.from_frame(frame, ColumnRoles("y", ("sex",), score="s"), threshold=0.5)


def test_permutation_records_backend_and_device_and_fails_loudly(gpus) -> None:
    gpus(0)
    ds = _scored()
    res = run_permutation_tests(ds, PermutationConfig(metrics=["auc"], n_permutations=99))
    p = res.parameters
    assert (p["backend"], p["backend_requested"]) == ("numpy", "auto")
    assert (p["device"], p["device_requested"]) == ("cpu", "auto")
    assert isinstance(res.details, PermutationDetails)
    assert res.details.tests[0].path == "auc-numpy"
    torch_cpu = run_permutation_tests(
        ds, PermutationConfig(metrics=["auc"], n_permutations=99, backend="torch")
    )
    assert (torch_cpu.parameters["backend"], torch_cpu.parameters["device"]) == ("torch", "cpu")
    assert isinstance(torch_cpu.details, PermutationDetails)
    assert torch_cpu.details.tests[0].path == "auc-torch-cpu"
    # an unavailable GPU stops the method; it is not turned into skipped tests
    with pytest.raises(ConfigError, match=r"methods\.permutation_tests\.device is 'cuda'"):
        run_permutation_tests(ds, PermutationConfig(metrics=["auc"], device="cuda"))
