"""Configuration of the FlipTest step (``methods.fliptest`` in the audit YAML)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from fairengine.devices import check_device
from fairengine.errors import ConfigError
from fairengine.setting_checks import require_integers

ESTIMATORS = ("entropic", "exact", "linear", "gan")
MODES = ("demographic_parity", "equalized_odds")
COSTS = ("sqeuclidean", "sqcityblock")
MAX_NULL_REFITS_DEFAULT = 1_999


@dataclass
class FlipTestConfig:
    """FlipTest with optimal-transport maps and statistics (:func:`run_fliptest`).

    enabled : run the step. Default False: its null and bootstrap refits make it the slowest
        method (19-24 s for Adult's sex and race, 7 group pairs, at the defaults on 2 cores);
        it also needs the model itself (``model.uri``).
    estimator : transport map: "entropic" (default; out-of-sample), "exact" (the paper's in-sample
        bijection, ``ot.emd``; groups are subsampled to equal size), "linear" (Gaussian closed
        form), "gan" (the paper's WGAN; slow).
    mode : "demographic_parity" (map whole groups, default) or "equalized_odds" (map within each
        true-label stratum and pool).
    attributes : protected attributes to test (None: all of the dataset's).
    threshold : decision threshold on P(y=1) (None: the dataset's threshold, else 0.5). In a
        regression audit a threshold on the prediction: the decision f(x) > threshold is
        flipped as in a binary audit (give either ``threshold`` or ``delta``). Not used in a
        multiclass audit.
    delta : regression audits: the smallest change of the prediction that counts as a flip
        (:mod:`fairengine.fliptest.outcomes`): F+ = {f(x) − f(T x) ≥ delta}, F− = {f(T x) −
        f(x) ≥ delta}, in the prediction's units. A regression audit needs ``delta`` or
        ``threshold``; other audits take neither. Default None.
    epsilon : entropic ε relative to the median pairwise cost (None: chosen from
        ``epsilon_grid`` on held-out data). Default None.
    epsilon_grid : candidate relative ε values. Default [0.01, 0.03, 0.1].
    cost : "sqeuclidean" (default) or "sqcityblock" (the original exact-OT code's cost; exact and
        gan only).
    max_per_group : groups larger than this are randomly subsampled (every statistic uses the
        same subsample; each null/bootstrap replicate is a refit at this size). Default 500
        (about 4 s per group pair at the default refit counts on one core; the cost grows about
        as the square of this number).
    min_group_size : groups smaller than this (per stratum in equalized-odds mode) are skipped
        with a warning. Default 50.
    max_pairs : at most this many group pairs per attribute (largest groups first). Default 6.
    n_permutations : label-permutation null refits. Default 49: the reported p-value is the
        larger of the two nulls' (an intersection-union test), so its floor is
        1 / (min(n_permutations, n_selfmap) + 1) = 0.02; raise both together.
    n_selfmap : self-map null refits. Default 49.
    n_bootstrap : bootstrap refits (intervals, rank stability, flip frequency). Default 49.
    max_null_refits : the most refits of each null (permutation, self-map) a flipset test may
        reach when the audit's sequential decisions draw more where its decision is open
        (``decisions``; :mod:`fairengine.fliptest.resampler`). A test that would need more is
        reported *undetermined* with the refits that would settle it; 0 draws none. Default
        MAX_NULL_REFITS_DEFAULT.
    confidence_level : interval level. Default 0.95.
    alpha : level used for "minimum detectable" rates in the readings. Default 0.05.
    stable_threshold : a flip is "stable" if it occurs in at least this share of refits.
        Default 0.5.
    protected_as_feature : pass the protected attribute to ``predict_proba`` (set to the source
        group for real rows and to the target group for mapped rows), for models that use it
        directly (the paper's law-school model). Default False.
    validate : run the held-out map validation (§4.3) per direction. Default True.
    top_features : transparency entries kept in the details per flipset. Default 10.
    histogram_bins : bins of the flipset marginal histograms. Default 20.
    gan_epochs : generator updates for estimator "gan". Default 20000.
    device : torch device of the entropic and GAN maps: "auto" (default; CUDA when torch sees a
        GPU, else CPU; entropic maps with ``max_per_group`` <= 2,000 stay on the CPU, whose
        numpy Sinkhorn loop is faster than GPU kernel launches at those sizes), "cpu", "cuda"
        or "cuda:<n>". Resolved when the run starts; the result's
        ``parameters`` record the device used (``device``) and this setting
        (``device_requested``).
    n_jobs : group pairs processed concurrently, on threads; results do not depend on it
        (every pair has its own seed). Default null: the machine's cores, at most 4 (Adult's 7
        pairs on 2 idle cores: 19.0 s on 2 threads against 23.4 s on one; the numpy Sinkhorn
        loop releases the GIL in its products, not in its many small vector operations).
    """

    enabled: bool = False
    estimator: str = "entropic"
    mode: str = "demographic_parity"
    attributes: list[str] | None = None
    threshold: float | None = None
    delta: float | None = None
    epsilon: float | None = None
    epsilon_grid: list[float] = field(default_factory=lambda: [0.01, 0.03, 0.1])
    cost: str = "sqeuclidean"
    max_per_group: int = 500
    min_group_size: int = 50
    max_pairs: int = 6
    n_permutations: int = 49
    n_selfmap: int = 49
    n_bootstrap: int = 49
    max_null_refits: int = MAX_NULL_REFITS_DEFAULT
    confidence_level: float = 0.95
    alpha: float = 0.05
    stable_threshold: float = 0.5
    protected_as_feature: bool = False
    validate: bool = True
    top_features: int = 10
    histogram_bins: int = 20
    gan_epochs: int = 20000
    device: str = "auto"
    n_jobs: int | None = None

    def __post_init__(self) -> None:
        def bad(name: str, expected: str) -> ConfigError:
            return ConfigError(
                f"methods.fliptest.{name} must be {expected}, got {getattr(self, name)!r}"
            )

        if self.estimator not in ESTIMATORS:
            raise bad("estimator", f"one of {list(ESTIMATORS)}")
        if self.mode not in MODES:
            raise bad("mode", f"one of {list(MODES)}")
        if self.cost not in COSTS:
            raise bad("cost", f"one of {list(COSTS)}")
        if self.cost != "sqeuclidean" and self.estimator in ("entropic", "linear"):
            raise bad("cost", "'sqeuclidean' for the entropic and linear maps")
        if self.threshold is not None and not (
            isinstance(self.threshold, int | float) and math.isfinite(self.threshold)
        ):
            raise bad("threshold", "a number or null")
        if self.delta is not None and not (
            isinstance(self.delta, int | float) and math.isfinite(self.delta) and self.delta > 0
        ):
            raise bad("delta", "a positive number or null (a regression audit's smallest change)")
        if self.epsilon is not None and not self.epsilon > 0:
            raise bad("epsilon", "a positive number or null")
        if not self.epsilon_grid or any(not e > 0 for e in self.epsilon_grid):
            raise bad("epsilon_grid", "a non-empty list of positive numbers")
        require_integers(
            "methods.fliptest",
            self,
            (
                ("max_per_group", 20),
                ("min_group_size", 10),
                ("max_pairs", 1),
                ("n_permutations", 0),
                ("n_selfmap", 0),
                ("n_bootstrap", 0),
                ("max_null_refits", 0),
                ("top_features", 1),
                ("histogram_bins", 2),
                ("gan_epochs", 1),
            ),
        )
        if self.n_jobs is not None:
            require_integers("methods.fliptest", self, (("n_jobs", 1),))
        for name in ("confidence_level", "alpha", "stable_threshold"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise bad(name, "in (0, 1)")
        check_device(self.device, "methods.fliptest.device")
        if self.attributes is not None and not all(isinstance(a, str) for a in self.attributes):
            raise bad("attributes", "a list of column names or null")


def pair_threads(config: FlipTestConfig) -> int:
    """Threads for the group pairs: ``n_jobs``, or the machine's cores (at most 4) when null."""
    if config.n_jobs is not None:
        return int(config.n_jobs)
    return max(1, min(4, os.cpu_count() or 1))


def check_task(config: FlipTestConfig, task: str) -> None:
    """Raise :class:`ConfigError` naming the setting of ``config`` that does not fit an audit
    of ``task`` (:mod:`fairengine.fliptest.outcomes`): a regression audit needs ``delta`` or
    ``threshold`` (not both) and maps whole groups; ``delta`` applies to regression only,
    ``threshold`` not to multiclass, and a binary audit's threshold is on P(y=1), in [0, 1].
    Checked when the audit config is read (FlipTest enabled) and when FlipTest runs."""
    if task == "regression":
        if config.mode != "demographic_parity":
            raise ConfigError(
                "methods.fliptest.mode: equalized_odds maps within true-label strata, which a "
                "regression audit's real-valued target does not have; use demographic_parity"
            )
        if config.delta is not None and config.threshold is not None:
            raise ConfigError(
                "methods.fliptest: give delta (a change of the prediction by at least delta is a "
                "flip) or threshold (the decision prediction > threshold flips), not both"
            )
        if config.delta is None and config.threshold is None:
            raise ConfigError(
                "methods.fliptest.delta is required in a regression audit: the smallest change "
                "of the prediction (in its units) that counts as a flip, e.g. delta: 0.5; or "
                "set methods.fliptest.threshold to flip the decision prediction > threshold"
            )
        return
    if config.delta is not None:
        raise ConfigError(
            f"methods.fliptest.delta applies to regression audits; this is a {task} audit "
            "(remove it)"
        )
    if task == "multiclass" and config.threshold is not None:
        raise ConfigError(
            "methods.fliptest.threshold does not apply to a multiclass audit (a flip is a "
            "change of the predicted class); remove it"
        )
    if task == "binary" and config.threshold is not None and not 0.0 <= config.threshold <= 1.0:
        raise ConfigError(
            "methods.fliptest.threshold must be in [0, 1] or null in a binary audit (a "
            f"threshold on P(y=1)), got {config.threshold!r}"
        )
