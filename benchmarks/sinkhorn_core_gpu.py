"""The CUDA paths of the one Sinkhorn core (issue 18) against the code before it, on a GPU.

Runs ``EntropicMap`` fits on CUDA (3,000 x 2,500 and 20,000 x 20,000 clustered 10-D points: the
torch points kernel), the bootstrap refits (``reweighted_refits``: the shared kernel) and the
split refits on CUDA (``split_refits``: the stacked kernels) and on the CPU, once with each
source tree (each in its own process, ``PYTHONPATH`` and working directory = the tree), and
prints a markdown table of the seconds (one timed call after a warm-up) and the largest
differences (potentials centred; images in original units).

Usage (on the GPU machine)::

    python benchmarks/sinkhorn_core_gpu.py --before /path/to/tree/before [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

WORK = r"""
import pickle, sys, time
import numpy as np, torch
from fairengine.transport import EntropicMap
from fairengine.transport.entropic_batch import reweighted_refits, split_refits

def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0

out = {}
rng = np.random.default_rng(7)
centres = rng.normal(scale=3.0, size=(8, 10))
def cloud(n, shift):
    return centres[rng.integers(0, 8, n)] + rng.normal(scale=0.6, size=(n, 10)) + shift
s, t = cloud(3000, 0.0), cloud(2500, 0.2)
big_s, big_t = cloud(20000, 0.0), cloud(20000, 0.2)
for name, (x, y) in {"3000x2500": (s, t), "20000x20000": (big_s, big_t)}.items():
    for dev in ("cuda", "cpu") if name == "3000x2500" else ("cuda",):
        EntropicMap(epsilon=0.05, device=dev).fit(x[:500], y[:500])
        m, sec = timed(lambda: EntropicMap(epsilon=0.05, device=dev).fit(x, y))
        out[f"fit {name} {dev}"] = dict(
            f=m.source_potential_, g=m.potential_, n_iter=m.n_iter_,
            images=m.transform(x[:300]), seconds=sec,
        )
m = EntropicMap(epsilon=0.05, device="cuda").fit(s[:500], t[:500])
rb = np.random.default_rng(1)
a = np.stack([np.bincount(rb.integers(0, 500, 500), minlength=500) / 500 for _ in range(49)], 1)
b = np.stack([np.bincount(rb.integers(0, 500, 500), minlength=500) / 500 for _ in range(49)], 1)
reweighted_refits(m, a, b, s[:200])
(im, ok), sec = timed(lambda: reweighted_refits(m, a, b, s[:200]))
out["reweighted_refits cuda 49"] = dict(images=im, ok=ok, seconds=sec)
pool = np.concatenate([s[:500], t[:500]])
rs = np.random.default_rng(2)
perms = np.stack([rs.permutation(1000) for _ in range(49)])
for dev in ("cuda", "cpu"):
    est = EntropicMap(epsilon=0.05, device=dev)
    run = lambda: split_refits(est, pool, perms[:, :500], perms[:, 500:], inverse=True)
    run()
    (fwd, inv, ok), sec = timed(run)
    out[f"split_refits {dev} 49"] = dict(images=fwd, inverse=inv, ok=ok, seconds=sec)
pickle.dump(out, open(sys.argv[1], "wb"))
"""


def run(tree: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.pkl"
        extra = os.environ.get("PYTHONPATH", "")
        env = dict(os.environ, PYTHONPATH=f"{tree}:{extra}" if extra else str(tree))
        subprocess.run([sys.executable, "-c", WORK, str(path)], env=env, check=True, cwd=tree)
        return pickle.loads(path.read_bytes())


def diff(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.nanmax(np.abs(np.asarray(x, float) - np.asarray(y, float))))


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=REPO)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    before, after = run(args.before), run(args.after)
    lines = [
        f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}",
        "",
        "| output | before s | after s | largest difference |",
        "|---|---|---|---|",
    ]
    for k, b in before.items():
        a = after[k]
        ok = b["ok"] & a["ok"] if "ok" in b else slice(None)
        parts = []
        for key in ("f", "g", "images", "inverse"):
            if key in b:
                x, y = np.asarray(b[key])[ok], np.asarray(a[key])[ok]
                if key in ("f", "g"):
                    x, y = x - x.mean(), y - y.mean()
                parts.append(f"{key} {diff(x, y):.2e}")
        extra = f" (iterations {b['n_iter']} / {a['n_iter']})" if "n_iter" in b else ""
        if "ok" in b:
            extra += f", converged {int(b['ok'].sum())} / {int(a['ok'].sum())}"
        lines.append(
            f"| {k}{extra} | {b['seconds']:.3f} | {a['seconds']:.3f} | {', '.join(parts)} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
