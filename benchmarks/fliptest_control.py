"""FlipTest control experiment (paper §5.1 / App. B) and the calibration of our null test.

Setup of App. B: S = N(0, I6), S′ = N((0, 0, 0, 2, 2, 2), I6). The model sees only features
1-3, which are identically distributed in both groups: an RBF-SVM (scikit-learn defaults) fitted
to uniformly random labels on 10,000 points of each group. Flipsets are counted on a fresh test
sample of 10,000 per group. The paper's WGAN flipped 167 of ~5,300 positives and 148 of ~4,700
negatives (about 3 % *of each class*, i.e. 1.7 % and 1.5 % of all 10,000 source rows).

Part 1 (replication, sweep over n): flip counts for the linear, exact, entropic (fixed ε grid and
the held-out choice) and, optionally, the paper's WGAN map, with the mean displacement of the
model-visible features ‖T(x)₁:₃ − x₁:₃‖: any displacement there is estimation noise, since the
population OT map is the translation by (0, 0, 0, 2, 2, 2).

Part 2 (calibration): ``--null-reps`` fresh control samples of ``--null-n`` per group, each
tested with :func:`fairengine.fliptest.flip_test` (the default held-out-ε entropic map, 19
permutation and 19 self-map refits); the rejection rate at α with its Monte-Carlo error. The
model here is an SVM fitted the same way on 2,000 points per group (predicting with the
20,000-support-vector SVM of part 1 would dominate the run time).

Run: ``.venv/bin/python benchmarks/fliptest_control.py [--sizes 1000,2000,5000,10000]
[--gan-epochs 20000] [--null-reps 100] [--null-n 500] [--device cuda]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy.stats import binomtest
from sklearn.svm import SVC

from fairengine.fliptest import flip_test
from fairengine.transport import EntropicMap, ExactOTMap, GANMap, LinearOTMap
from fairengine.transport._base import TransportMap

try:
    from fliptest_markdown import write
except ImportError:
    from benchmarks.fliptest_markdown import write

SHIFT = np.array([0, 0, 0, 2.0, 2.0, 2.0])


def control_sample(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n points of S = N(0, I6) and n of S′ = N(SHIFT, I6)."""
    return rng.normal(size=(n, 6)), rng.normal(size=(n, 6)) + SHIFT


def random_label_svm(rng: np.random.Generator, n_train: int) -> SVC:
    """App. B's model: RBF-SVM on features 1-3 of n_train points per group, random labels."""
    xs, xt = control_sample(rng, n_train)
    return SVC(kernel="rbf").fit(np.vstack([xs, xt])[:, :3], rng.integers(0, 2, 2 * n_train))


def replication(args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    t0 = time.perf_counter()
    svm = random_label_svm(rng, args.n_train)
    train_seconds = time.perf_counter() - t0
    n_max = max(args.sizes)
    xs_all, xt_all = control_sample(rng, n_max)
    dec_all = svm.predict(xs_all[:, :3]) == 1
    lines = [
        "## 1. Replication: flip counts over n (one test sample, nested subsamples)",
        "",
        f"SVM: {args.n_train:,} training points per group, random labels, "
        f"{int(svm.n_support_.sum()):,} support vectors (fit {train_seconds:.0f} s); positive "
        f"rate on the source test sample {dec_all.mean():.1%} (paper: 53 %). Rates in % of all "
        "source rows, then (in brackets) % of the source positives for F+ and of the source "
        "negatives for F-, the paper's denominators. |dx 1-3|: mean norm of the displacement "
        "of the model-visible features (0 for the population map); dx 4-6: mean shift of the "
        "others (population map: 2).",
        "",
        "| map | n per group | F+ | F- | F+ % all (% pos) | F- % all (% neg) | mean \\|dx 1-3\\|"
        " | mean dx 4-6 | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
        "| paper (WGAN) | 10,000 | 167 | 148 | 1.7 (3.2) | 1.5 (3.1) | | <0.01 per feature "
        "(signed) / ~2 | |",
    ]

    def add(name: str, n: int, images: np.ndarray, seconds: float) -> None:
        xs, dec = xs_all[:n], dec_all[:n]
        mapped = svm.predict(images[:, :3]) == 1
        fp, fn = int((dec & ~mapped).sum()), int((~dec & mapped).sum())
        disp = float(np.linalg.norm(images[:, :3] - xs[:, :3], axis=1).mean())
        lines.append(
            f"| {name} | {n:,} | {fp:,} | {fn:,} | {fp / n:.2%} ({fp / dec.sum():.1%}) | "
            f"{fn / n:.2%} ({fn / (~dec).sum():.1%}) | {disp:.3f} | "
            f"{(images[:, 3:] - xs[:, 3:]).mean():.2f} | {seconds:.0f} |"
        )
        print(lines[-1], flush=True)

    for n in sorted(args.sizes):
        xs, xt = xs_all[:n], xt_all[:n]
        maps: list[tuple[str, Callable[[], TransportMap]]] = [("linear", LinearOTMap)]
        if n <= args.exact_max:
            maps.append(("exact OT", lambda n=n: ExactOTMap(max_samples=max(n, 10_000))))
        for eps in args.eps:
            maps.append(
                (f"entropic eps={eps:g}", lambda e=eps: EntropicMap(epsilon=e, device=args.device))
            )
        maps.append(("entropic, held-out eps", lambda: EntropicMap(device=args.device)))
        for name, make in maps:
            m = make()
            t0 = time.perf_counter()
            images = m.fit_transform(xs, xt)
            if name.startswith("entropic, held-out"):
                name = f"entropic, held-out eps (= {m.epsilon_:g})"
            add(name, n, images, time.perf_counter() - t0)
    if args.gan_epochs:
        n = n_max
        gan = GANMap(epochs=args.gan_epochs, device=args.device, random_state=0)
        t0 = time.perf_counter()
        images = gan.fit_transform(xs_all[:n], xt_all[:n])
        add(
            f"WGAN replica ({args.gan_epochs:,} epochs, sq-L1, lambda 1e-4, seed 0)",
            n,
            images,
            time.perf_counter() - t0,
        )
    return lines


def calibration(args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    svm = random_label_svm(rng, 2000)

    def decide(x: np.ndarray, group: str) -> np.ndarray:
        return svm.predict(x[:, :3]) == 1

    reps, n, r = args.null_reps, args.null_n, args.null_refits
    p = {k: np.empty(reps) for k in ("pos", "neg", "pos_perm", "neg_perm", "pos_self", "neg_self")}
    rates = np.empty((reps, 2))
    t0 = time.perf_counter()
    for i in range(reps):
        xs, xt = control_sample(rng, n)
        res = flip_test(
            EntropicMap(device=args.device),
            xs,
            xt,
            decide,
            "s",
            "t",
            n_permutations=r,
            n_selfmap=r,
            n_bootstrap=0,
            seed=int(rng.integers(2**31)),
        )
        for kind, short in (("positive", "pos"), ("negative", "neg")):
            t = res.tests[kind]
            p[short][i] = t.pvalue
            p[f"{short}_perm"][i] = t.pvalue_permutation
            p[f"{short}_self"][i] = t.pvalue_selfmap
        rates[i] = res.tests["positive"].statistic, res.tests["negative"].statistic
    seconds = time.perf_counter() - t0
    a = args.alpha

    def rate(mask: np.ndarray) -> str:
        k = int(mask.sum())
        ci = binomtest(k, reps).proportion_ci(0.95)
        se = np.sqrt(mask.mean() * (1 - mask.mean()) / reps)
        return (
            f"{k}/{reps} = {k / reps:.1%} (MC s.e. {se:.1%}; 95% CI {ci.low:.1%} to {ci.high:.1%})"
        )

    return [
        "",
        f"## 2. Calibration: does the null-calibrated test reject at alpha = {a}?",
        "",
        f"{reps} independent control samples of {n:,} per group (fresh data each time; the "
        f"model is fixed: SVM on 2,000 random-label points per group, positive rate "
        f"{float(np.mean(decide(control_sample(rng, 5000)[0], 's'))):.1%}). Each is tested with "
        f"the pipeline's default map (entropic, held-out eps) and {r} permutation + {r} "
        f"self-map refits: p = max(p_perm, p_self), smallest attainable p {1 / (r + 1):.2f}. "
        f"Total {seconds:.0f} s.",
        "",
        "| flipset | observed rate: mean (range) | rejections at alpha (p <= alpha) | "
        "p_perm <= alpha | p_self <= alpha | median p |",
        "|---|---|---|---|---|---|",
        *(
            f"| {label} | {rates[:, j].mean():.2%} ({rates[:, j].min():.2%}-"
            f"{rates[:, j].max():.2%}) | {rate(p[s] <= a)} | {rate(p[s + '_perm'] <= a)} | "
            f"{rate(p[s + '_self'] <= a)} | {np.median(p[s]):.2f} |"
            for j, (label, s) in enumerate((("F+", "pos"), ("F-", "neg")))
        ),
        f"| either (no multiplicity correction) | | {rate((p['pos'] <= a) | (p['neg'] <= a))} "
        "| | | |",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,2000,5000,10000")
    ap.add_argument("--n-train", type=int, default=10_000, help="SVM training points per group")
    ap.add_argument("--exact-max", type=int, default=10_000)
    ap.add_argument("--eps", default="0.01,0.03,0.1", help="fixed relative epsilons")
    ap.add_argument("--gan-epochs", type=int, default=20_000, help="0 skips the GAN")
    ap.add_argument("--null-reps", type=int, default=100, help="0 skips the calibration")
    ap.add_argument("--null-n", type=int, default=500)
    ap.add_argument("--null-refits", type=int, default=19)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    args.sizes = [int(v) for v in args.sizes.split(",") if v]
    args.eps = [float(v) for v in args.eps.split(",") if v]
    body = replication(args, np.random.default_rng(0)) if args.sizes else []
    if args.null_reps:
        body += calibration(args, np.random.default_rng(1))
    write(
        f"fliptest_control{'_cuda' if args.device == 'cuda' else ''}",
        "FlipTest control experiment (identical model-visible features)",
        body,
        args.device,
    )


if __name__ == "__main__":
    main()
