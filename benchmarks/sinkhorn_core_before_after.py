"""The one Sinkhorn core (issue 18) against the code before it: same potentials, maps, flipsets
and decisions, and FlipTest no slower.

Two source trees are compared: ``--before`` (a worktree of the commit before the change,
``git worktree add /tmp/before <commit>``) and ``--after`` (default: this checkout). Each tree
runs in its own Python process (``PYTHONPATH`` = the tree), so both import their own
``fairengine``:

* outputs, once per tree: ``EntropicMap`` fits (potentials f and g, iterations, the images of
  held-out queries) on the Lipton hiring data (500 x 500: the numpy loop), on clustered 10-D
  points (3,000 x 2,500: the torch loop), and on Adult's sex groups (500 x 500, 39 one-hot and
  continuous features); the batched refits (``reweighted_refits``: the shared kernel;
  ``split_refits``: one-by-one on the CPU; ``stabilized_batch_sinkhorn``: the stacked kernels);
  FlipTest at its defaults (``run_fliptest``, 500 per group, 49 refits per null and bootstrap)
  on the hiring demo data and on Adult's sex attribute, plus ``flip_test`` women -> men on the
  Lipton data (flipsets and mapped decisions per individual);
* speed: ``run_fliptest`` at its defaults on both data sets, processes alternating
  before, after, before, after, ... (``--rounds``), each timing one call after a warm-up fit.

Usage::

    git worktree add /tmp/before <commit before the change>
    .venv/bin/python benchmarks/sinkhorn_core_before_after.py --before /tmp/before [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "results" / "sinkhorn_core_before_after.md"


# ------------------------------------------------------------------------------ worker side
def _hiring() -> tuple[Any, Any]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from fairengine.dataset import AuditDataset
    from fairengine.datasets import make_lipton_hiring
    from fairengine.roles import ColumnRoles

    data = make_lipton_hiring(seed=0)
    roles = data.roles
    train, audit = train_test_split(
        data.frame, test_size=0.5, random_state=0, stratify=data.frame["gender"]
    )
    feats = list(roles.features)
    lr = LogisticRegression().fit(train[feats], train[roles.label])
    ds = AuditDataset.from_frame(
        audit.assign(score=lr.predict_proba(audit[feats])[:, 1]),
        ColumnRoles(label=roles.label, protected=roles.protected, features=feats, score="score"),
        threshold=0.5,
    )
    return ds, lambda f: lr.predict_proba(f[feats])


def _adult() -> tuple[Any, Any, Any]:
    sys.path.insert(0, str(HERE))
    from full_audit_adult import ADULT, adult_dataset

    ds, table, features, model = adult_dataset(ADULT)
    return ds, table, (lambda f: model.predict_proba(f[features]), features)


def _findings(res: Any) -> list[tuple]:
    """(key, estimate, interval, p-value, decision) per finding; the decision is the method's
    own, or (FlipTest leaves decisions to the audit's decision step) rejected / not rejected
    at p <= 0.05."""
    out = []
    for f in res.findings:
        iv = f.interval
        p = None if f.pvalue is None else float(f.pvalue)
        decision = f.decision
        if decision == "not_tested" and p is not None:
            decision = "p<=0.05" if p <= 0.05 else "p>0.05"
        out.append(
            (
                f.key,
                float(f.estimate),
                None if iv is None else (float(iv.low), float(iv.high)),
                p,
                decision,
            )
        )
    return sorted(out)


def _fliptest(which: str) -> tuple[list[tuple], tuple[float, float]]:
    from fairengine.fliptest import FlipTestConfig, run_fliptest

    if which == "hiring":
        ds, pp = _hiring()
        attr = "gender"
    else:
        ds, _table, (pp, _f) = _adult()
        attr = "sex"
    cfg = FlipTestConfig(enabled=True, attributes=[attr])
    t0, c0 = time.perf_counter(), time.process_time()
    res = run_fliptest(ds, cfg, seed=0, predict_proba=pp)
    return _findings(res), (time.perf_counter() - t0, time.process_time() - c0)


def _fits() -> dict[str, Any]:
    import torch

    from fairengine.datasets import make_lipton_hiring
    from fairengine.fliptest import flip_test
    from fairengine.transport import EntropicMap
    from fairengine.transport.entropic_batch import (
        reweighted_refits,
        split_refits,
        stabilized_batch_sinkhorn,
    )

    out: dict[str, Any] = {}
    frame = make_lipton_hiring(500, label_variant="gan").frame
    x = frame[["work_exp", "hair_len"]].to_numpy()
    women, men = x[(frame.gender == "woman").to_numpy()], x[(frame.gender == "man").to_numpy()]
    rng = np.random.default_rng(7)
    centres = rng.normal(scale=3.0, size=(8, 10))
    big_s = centres[rng.integers(0, 8, 3000)] + rng.normal(scale=0.6, size=(3000, 10))
    big_t = centres[rng.integers(0, 8, 2500)] + rng.normal(scale=0.6, size=(2500, 10)) + 0.2
    _ds, table, (_pp, features) = _adult()
    import pandas as pd

    xa = pd.get_dummies(table[features], dtype=float).to_numpy()
    sex = table["sex"].to_numpy()
    groups = sorted(set(sex))
    ra = np.random.default_rng(0)
    a_s = xa[sex == groups[0]][ra.choice(int((sex == groups[0]).sum()), 500, replace=False)]
    a_t = xa[sex == groups[1]][ra.choice(int((sex == groups[1]).sum()), 500, replace=False)]
    problems = {
        "lipton 500x500": (women, men, {}),
        "clustered 3000x2500 (torch loop)": (big_s, big_t, {"epsilon": 0.05}),
        "adult sex 500x500": (a_s, a_t, {"constant_features": "hold"}),
    }
    for name, (s, t, kw) in problems.items():
        t0 = time.perf_counter()
        m = EntropicMap(random_state=0, **kw).fit(s, t)
        sec = time.perf_counter() - t0
        out[f"fit {name}"] = {
            "f": m.source_potential_,
            "g": m.potential_,
            "eps": m.epsilon_,
            "n_iter": m.n_iter_,
            "images": m.transform(s[:200]),
            "seconds": sec,
            "scale": float(np.abs(t).max()),
        }
    # batched refits on the Lipton fit
    m = EntropicMap(random_state=0).fit(women, men)
    n_s, n_t = len(m.anchors_), len(m.support_)
    rb = np.random.default_rng(1)
    a = np.stack([np.bincount(rb.integers(0, n_s, n_s), minlength=n_s) / n_s for _ in range(9)], 1)
    b = np.stack([np.bincount(rb.integers(0, n_t, n_t), minlength=n_t) / n_t for _ in range(9)], 1)
    im, ok = reweighted_refits(m, a, b, women[:200])
    out["reweighted_refits (shared kernel)"] = {"images": im, "ok": ok, "scale": 1.0}
    pool = np.concatenate([women, men])
    rs = np.random.default_rng(2)
    perms = np.stack([rs.permutation(len(pool)) for _ in range(9)])
    est = EntropicMap(epsilon=m.epsilon_, random_state=0)
    fwd, inv, ok = split_refits(est, pool, perms[:, :500], perms[:, 500:], inverse=True)
    out["split_refits (one by one)"] = {"images": fwd, "inverse": inv, "ok": ok, "scale": 1.0}
    xs = torch.as_tensor(a_s[perms[:4, :250] % 500])
    ys = torch.as_tensor(a_t[perms[:4, 250:500] % 500])
    f, g, ok = stabilized_batch_sinkhorn(xs, ys, 0.05 * 2 * a_s.shape[1], max_iter=4000)
    out["stabilized_batch_sinkhorn (stacked kernels)"] = {
        "f": f.numpy(),
        "g": g.numpy(),
        "ok": ok,
        "scale": 1.0,
    }
    # flipsets, women -> men, FlipTest's statistics at their defaults
    res = flip_test(
        EntropicMap(random_state=0, constant_features="hold"),
        women,
        men,
        lambda z, group="": z @ np.array([1.4028, 1.1688]) > 0.8684,
        "woman",
        "man",
        scale=x.std(0),
        seed=0,
    )
    out["flip_test lipton women->men"] = {
        "mapped_decision": np.asarray(res.flipsets.mapped_decision),
        "counts": {k: t.count for k, t in res.tests.items()},
        "pvalues": {
            k: (t.pvalue_permutation, t.pvalue_selfmap, t.pvalue) for k, t in res.tests.items()
        },
        "intervals": {
            k: (t.confidence_interval().low, t.confidence_interval().high)
            for k, t in res.tests.items()
        },
        "flip_frequency": {k: np.asarray(v) for k, v in res.flip_frequency.items()},
    }
    return out


def worker(mode: str, path: Path) -> None:
    if mode == "outputs":
        result: dict[str, Any] = {"fits": _fits()}
        for which in ("hiring", "adult"):
            result[which], result[f"{which} seconds"] = _fliptest(which)
    else:
        from fairengine.transport import EntropicMap

        rng = np.random.default_rng(0)
        EntropicMap(epsilon=0.05).fit(rng.normal(size=(300, 3)), rng.normal(size=(300, 3)))
        result = {which: _fliptest(which)[1] for which in ("hiring", "adult")}
    path.write_bytes(pickle.dumps(result))


# ------------------------------------------------------------------------------ driver side
def run_tree(tree: Path, mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.pkl"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(
            [sys.executable, __file__, "--worker", mode, "--to", str(out)],
            check=True,
            cwd=tree,
            env=env,
        )
        return pickle.loads(out.read_bytes())


def _maxdiff(x: Any, y: Any) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    both = np.isfinite(x) & np.isfinite(y)
    if not (np.isfinite(x) == np.isfinite(y)).all():
        return float("inf")
    return float(np.abs(x[both] - y[both]).max()) if both.any() else 0.0


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines = [
        "| output | before | after | largest difference |",
        "|---|---|---|---|",
    ]
    for name, b in before["fits"].items():
        a = after["fits"][name]
        if name.startswith("fit "):
            # potentials are defined up to f + c, g − c: compare the plan's invariants
            df = _maxdiff(b["f"] - b["f"].mean(), a["f"] - a["f"].mean())
            dg = _maxdiff(b["g"] - b["g"].mean(), a["g"] - a["g"].mean())
            lines.append(
                f"| {name}: ε (relative), iterations | {b['eps']:g}, {b['n_iter']} | "
                f"{a['eps']:g}, {a['n_iter']} | centred f {df:.2e}, g {dg:.2e} (in units of ε: "
                f"{df / (b['eps']):.2e} x median cost) |"
            )
            lines.append(
                f"| {name}: images of 200 source points | {b['seconds']:.2f} s | "
                f"{a['seconds']:.2f} s | {_maxdiff(b['images'], a['images']):.2e} |"
            )
        elif name.startswith("flip_test"):
            agree = float(np.mean(b["mapped_decision"] == a["mapped_decision"]))
            lines.append(
                f"| {name}: flipset counts | {b['counts']} | {a['counts']} | mapped decisions "
                f"agree on {agree:.2%} of women |"
            )
            for k in b["pvalues"]:
                pb = ", ".join(f"{v:.3f}" for v in b["pvalues"][k])
                pa = ", ".join(f"{v:.3f}" for v in a["pvalues"][k])
                ib = ", ".join(f"{v:.4f}" for v in b["intervals"][k])
                ia = ", ".join(f"{v:.4f}" for v in a["intervals"][k])
                dfreq = _maxdiff(b["flip_frequency"][k], a["flip_frequency"][k])
                lines.append(
                    f"| {name}: {k} p (permutation, self-map, both); bootstrap interval | "
                    f"{pb}; [{ib}] | {pa}; [{ia}] | flip frequency {dfreq:.3f} |"
                )
        else:
            parts = []
            for key in ("images", "inverse", "f", "g"):
                if key in b and b[key] is not None:
                    x, y = np.asarray(b[key]), np.asarray(a[key])
                    if key in ("f", "g"):
                        x = x - x.mean(axis=-1, keepdims=True)
                        y = y - y.mean(axis=-1, keepdims=True)
                    ok = b["ok"] & a["ok"]
                    parts.append(f"{key} {_maxdiff(x[ok], y[ok]):.2e}")
            lines.append(
                f"| {name} | converged {int(b['ok'].sum())}/{len(b['ok'])} | converged "
                f"{int(a['ok'].sum())}/{len(a['ok'])} | {', '.join(parts)} |"
            )
    for which in ("hiring", "adult"):
        fb, fa = before[which], after[which]
        same_dec = [x[0] for x, y in zip(fb, fa, strict=True) if x[4] != y[4]]
        d_est = max(abs(x[1] - y[1]) for x, y in zip(fb, fa, strict=True))
        d_p = max(abs((x[3] or 0.0) - (y[3] or 0.0)) for x, y in zip(fb, fa, strict=True))
        pairs = [(x[0], x[1], y[1], x[3], y[3], x[4], y[4]) for x, y in zip(fb, fa, strict=True)]
        lines.append(
            f"| run_fliptest {which}: {len(fb)} findings | decisions "
            f"{sorted({x[4] for x in fb})} | decisions {sorted({x[4] for x in fa})} | "
            f"estimates {d_est:.4f}, p-values {d_p:.4f}; decisions that differ: "
            f"{same_dec or 'none'} |"
        )
        for key, eb, ea, pb, pa, db, da in pairs:
            if pb is not None:
                lines.append(
                    f"| &nbsp;&nbsp;{key} | {eb:.4f}, p {pb:.3f}, {db} | {ea:.4f}, p {pa:.3f}, "
                    f"{da} | |"
                )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path)
    ap.add_argument("--after", type=Path, default=REPO)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", choices=["outputs", "time"])
    ap.add_argument("--to", type=Path)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--timing-only", action="store_true", help="skip the outputs, print times")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.to)
    trees = {"before": args.before, "after": args.after}
    outputs = {} if args.timing_only else {k: run_tree(t, "outputs") for k, t in trees.items()}
    times: dict[str, dict[str, list[tuple[float, float]]]] = {
        k: {"hiring": [], "adult": []} for k in trees
    }
    for r in range(args.rounds):
        for k in ("before", "after") if r % 2 == 0 else ("after", "before"):
            got = run_tree(trees[k], "time")
            for which, sec in got.items():
                times[k][which].append(sec)
            print(k, got, flush=True)
    if args.timing_only:
        for which in ("hiring", "adult"):
            for j, kind in ((0, "wall"), (1, "cpu")):
                b = [t[j] for t in times["before"][which]]
                a = [t[j] for t in times["after"][which]]
                print(which, kind, np.median(b), np.median(a), np.median(a) / np.median(b))
        return
    rev = {
        k: subprocess.run(
            ["git", "-C", str(t), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        for k, t in trees.items()
    }
    load = os.getloadavg()
    text = [
        "# One Sinkhorn core: before / after",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- command: `python benchmarks/sinkhorn_core_before_after.py --before {args.before} "
        f"--rounds {args.rounds}`",
        f"- before: {args.before} at {rev['before']}; after: {args.after} at {rev['after']} "
        "plus the working tree's changes",
        f"- machine: {platform.system().lower()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, no GPU used; load average at the end "
        f"{load[0]:.2f} / {load[1]:.2f}",
        "",
        "## Same outputs",
        "",
        "Potentials are compared centred (f + c, g − c give the same plan); the images are the",
        "entropic map's (original units). Each tree ran in its own process with the same seeds.",
        "",
        *compare(outputs["before"], outputs["after"]),
        "",
        "## FlipTest at its defaults, interleaved",
        "",
        f"`run_fliptest` (500 per group, 49 permutation / self-map / bootstrap refits), one call "
        f"per process after a warm-up fit, processes alternating ({args.rounds} rounds, the "
        "order swapped every round). Seconds of wall clock and of the process's CPU time (the "
        "machine is shared with other jobs: CPU time is the steadier measure under load):",
        "",
        "| data | clock | before (each) | after (each) | median before | median after | "
        "after / before |",
        "|---|---|---|---|---|---|---|",
    ]
    for which, label in (("hiring", "hiring demo, gender"), ("adult", "Adult, sex")):
        for j, kind in ((0, "wall"), (1, "CPU")):
            b = [t[j] for t in times["before"][which]]
            a = [t[j] for t in times["after"][which]]
            text.append(
                f"| {label} | {kind} | {', '.join(f'{v:.2f}' for v in b)} | "
                f"{', '.join(f'{v:.2f}' for v in a)} | {np.median(b):.2f} | "
                f"{np.median(a):.2f} | {np.median(a) / np.median(b):.3f} |"
            )
    text.append("")
    args.out.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
