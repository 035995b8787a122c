"""Shared output of the FlipTest benchmarks: a markdown table with date, machine and command."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def machine_note(device: str = "cpu") -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu = f"{os.cpu_count()} CPU cores, torch threads {torch.get_num_threads()}"
    gpu = f", GPU {torch.cuda.get_device_name(0)}" if device == "cuda" else ""
    shared = (
        " Other jobs were sharing the cores (load average above the core count): wall times "
        "are upper bounds."
        if load > (os.cpu_count() or 1)
        else ""
    )
    return f"{platform.node()}: {cpu}{gpu}; 1-min load average {load:.1f} at the end.{shared}"


def write(name: str, title: str, body: list[str], device: str = "cpu") -> Path:
    """Print ``body`` and write it to ``benchmarks/results/<name>.md`` with provenance."""
    text = "\n".join(
        [
            f"# {title}",
            "",
            f"- date: {dt.datetime.now().isoformat(timespec='seconds')}",
            f"- command: `{' '.join([Path(sys.executable).name, *sys.argv])}`",
            f"- machine: {machine_note(device)}",
            "",
            *body,
            "",
        ]
    )
    print(text)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.md"
    out.write_text(text)
    return out
