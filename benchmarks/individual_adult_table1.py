"""Table 1 of Maity et al. (ICLR 2021) on Adult: four models, 10 splits, both tests.

For each of the authors' 10 (data, model) seeds: the authors' preprocessing and split
(``individual_adult_setup.py``), train Baseline, Project, Reduction and SenSR, fit the fair
metric on the test split (logistic regressions of sex and race, sklearn defaults, orthonormalised
span; the paper's audit), run the gradient-flow attack on all 9,045 test rows (λ = 50, η = 0.01
constant, started at x0) and compute

* the loss-ratio lower bound T_n (ddof 0, no loss floor, non-finite ratios dropped: the authors'
  code) at T = 200 and T = 500 — the authors' code used T = 200 for Baseline, Project and SenSR
  and T = 500 for Reduction (notes §2.5), the paper's text says T = 500;
* the error-rate-ratio lower bound (delta method) at T = 500;
* rejection proportions (p < 0.05 at δ = 1.25) and balanced accuracy.

Run: ``nice -n 10 .venv/bin/python benchmarks/individual_adult_table1.py [--splits 10]
[--device cpu|cuda]`` (writes ``benchmarks/results/individual_adult_table1.md`` and a per-split
JSON next to it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from individual_adult_setup import (
    SEEDS,
    accuracy,
    maity_adult,
    orth_projection,
    sensitive_directions,
    split,
    train_mlp,
    train_reduction,
    train_sensr,
)

from fairengine.individual import (
    SensitiveSubspaceMetric,
    TorchClassifier,
    error_rate_ratio_test,
    gradient_flow,
    loss_ratio_test,
    sklearn_to_torch,
)

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = ("Baseline", "Project", "Reduction", "SenSR")
PAPER = {  # Table 1 / Table 3 of the paper: loss LB mean (sd), reject prop, 0-1 LB mean (sd), prop
    "Baseline": (3.676, 2.164, 1.0, 2.262, 0.356, 1.0),
    "Project": (1.660, 0.355, 0.9, 1.800, 0.584, 0.8),
    "Reduction": (5.712, 2.264, 1.0, 3.275, 0.343, 1.0),
    "SenSR": (1.021, 0.008, 0.0, 1.081, 0.041, 0.0),
}
CODE_T = {"Baseline": 200, "Project": 200, "Reduction": 500, "SenSR": 200}


def audit(clf: TorchClassifier, X: np.ndarray, y: np.ndarray, S: np.ndarray, device: str) -> dict:
    metric = SensitiveSubspaceMetric().fit(X, S)
    flow = gradient_flow(
        clf, X, y, metric, lam=50.0, steps=500, eta=0.01, record_steps=[200], device=device
    )
    out = {"seconds_attack": flow.seconds, "n_diverged": flow.n_diverged}
    for T in (200, 500):
        r = loss_ratio_test(flow.loss_original, flow.loss_path[T], eps=0.0, ddof=0)
        out[f"loss_lb_T{T}"] = r.lower_bound
        out[f"loss_p_T{T}"] = r.pvalue
        out[f"loss_mean_T{T}"] = r.statistic
    Xt = torch.as_tensor(X, dtype=torch.float64)
    c = clf.to("cpu", torch.float64)
    p0 = c.proba(Xt).numpy()
    p1 = c.proba(torch.as_tensor(flow.X, dtype=torch.float64)).numpy()
    e = error_rate_ratio_test((p0 > 0.5) != y, (p1 > 0.5) != y)
    out |= {"err_lb_T500": e.lower_bound, "err_p_T500": e.pvalue, "err_ratio_T500": e.statistic}
    out["acc"], out["bal_acc"] = accuracy(p0, y)
    return out


def run_split(
    k: int, X: np.ndarray, y: np.ndarray, device: str, sensr_epochs: int, sensr_lr: float
) -> dict:
    seed_data, seed_model = SEEDS[k]
    s = split(X, y, seed_data)
    res: dict[str, dict] = {}
    t = time.perf_counter()
    base = train_mlp(s["Xtr"], s["ytr"], seed=seed_model)
    proj = train_mlp(
        s["Xtr"], s["ytr"], seed=seed_model,
        projection=orth_projection(sensitive_directions(s["Xtr"], s["Str"])),
    )  # fmt: skip
    red = train_reduction(s["Xtr"], s["ytr"], s["Str"])
    sensr = train_sensr(
        s["Xtr"], s["ytr"], sensitive_directions(s["Xtr"], s["Str"], solver="liblinear"),
        seed=seed_model, epochs=sensr_epochs, lr=sensr_lr,
    )  # fmt: skip
    t_train = time.perf_counter() - t
    mod, output, _, _ = sklearn_to_torch(red)
    clfs = {
        "Baseline": TorchClassifier(base),
        "Project": TorchClassifier(proj),
        "Reduction": TorchClassifier(mod, output),
        "SenSR": TorchClassifier(sensr),
    }
    for name, clf in clfs.items():
        res[name] = audit(clf, s["Xte"], s["yte"], s["Ste"], device)
    res["_meta"] = {"seed_data": seed_data, "seed_model": seed_model, "seconds_train": t_train}
    return res


def summarise(per_split: list[dict]) -> tuple[str, dict]:
    rows = []
    summary = {}
    for m in MODELS:
        r = [s[m] for s in per_split]

        def mean_sd(key: str, r: list = r) -> tuple[float, float]:
            v = np.array([x[key] for x in r])
            return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan")

        code_key = f"loss_lb_T{CODE_T[m]}"
        lc, lcs = mean_sd(code_key)
        l5, l5s = mean_sd("loss_lb_T500")
        e5, e5s = mean_sd("err_lb_T500")
        rej_code = float(np.mean([x[f"loss_p_T{CODE_T[m]}"] < 0.05 for x in r]))
        rej5 = float(np.mean([x["loss_p_T500"] < 0.05 for x in r]))
        rej_e = float(np.mean([x["err_p_T500"] < 0.05 for x in r]))
        bal = float(np.mean([x["bal_acc"] for x in r]))
        p = PAPER[m]
        summary[m] = {
            "loss_lb_code_T": lc, "loss_lb_T500": l5, "err_lb_T500": e5, "reject_code_T": rej_code,
            "reject_T500": rej5, "reject_err": rej_e, "bal_acc": bal,
        }  # fmt: skip
        rows.append(
            f"| {m} | {bal:.3f} | {lc:.3f} ± {lcs:.3f} (T={CODE_T[m]}) | {rej_code:.1f} | "
            f"{l5:.3f} ± {l5s:.3f} | {rej5:.1f} | {p[0]:.3f} ± {p[1]:.3f} / {p[2]:.1f} | "
            f"{e5:.3f} ± {e5s:.3f} | {rej_e:.1f} | {p[3]:.3f} ± {p[4]:.3f} / {p[5]:.1f} |"
        )
    head = (
        "| model | bal. acc | loss LB, code's T | reject | loss LB, T=500 | reject | paper loss "
        "LB / reject | 0-1 LB, T=500 | reject | paper 0-1 LB / reject |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    return head + "\n" + "\n".join(rows), summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sensr-epochs", type=int, default=2000)
    ap.add_argument("--sensr-lr", type=float, default=1e-4)
    ap.add_argument("--out", default="individual_adult_table1")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    X, y, _ = maity_adult()
    per_split = []
    t0 = time.perf_counter()
    RESULTS.mkdir(exist_ok=True)
    for k in range(args.splits):
        per_split.append(run_split(k, X, y, args.device, args.sensr_epochs, args.sensr_lr))
        m = per_split[-1]
        print(
            f"split {k} seed {SEEDS[k][0]}: "
            + ", ".join(
                f"{n} LB {m[n][f'loss_lb_T{CODE_T[n]}']:.3f}/{m[n]['loss_lb_T500']:.3f} "
                f"err {m[n]['err_lb_T500']:.3f} bal {m[n]['bal_acc']:.3f}"
                for n in MODELS
            ),
            flush=True,
        )
        (RESULTS / f"{args.out}.json").write_text(json.dumps(per_split, indent=1))
        write_report(per_split, args, t0)


def write_report(per_split: list[dict], args: argparse.Namespace, t0: float) -> None:
    table, summary = summarise(per_split)
    load = os.getloadavg()
    text = f"""# Individual fairness: Table 1 of Maity et al. (2021) on Adult

- Date: {datetime.now(UTC).isoformat(timespec="seconds")}
- Machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, device
  {args.device}, {args.threads} torch thread(s); load average at the end {load[0]:.1f} /
  {load[1]:.1f} / {load[2]:.1f} (other engineers' jobs shared the 2 cores)
- Command: `nice -n 10 .venv/bin/python benchmarks/individual_adult_table1.py --splits
  {args.splits} --device {args.device} --sensr-epochs {args.sensr_epochs} --sensr-lr
  {args.sensr_lr:g}`
- Splits: {len(per_split)} of the authors' 10 seeds done (requested {args.splits}); total
  {time.perf_counter() - t0:.0f} s. SenSR: Adam lr {args.sensr_lr:g}, {args.sensr_epochs}
  iterations (the authors' script: lr 1e-5, 2,000)
- Attack: λ = 50, η = 0.01 constant, started at x0, all 9,045 test rows; metric fitted on the
  test split (the paper). Loss-ratio LB: ddof 0, no floor (the authors' code). "code's T" = 200
  for Baseline/Project/SenSR and 500 for Reduction (what produced the paper's column, notes §2.5).
  Paper columns: Table 3 (mean ± sd over 10 splits / rejection proportion).

{table}

Per-split values: `benchmarks/results/{args.out}.json`.
"""
    (RESULTS / f"{args.out}.md").write_text(text)
    print(text)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
