"""The report as a PDF (``tasks/report_pdf.py``): headless Chromium's ``--print-to-pdf``.

Checked: the missing browser is a clear error naming what is missing, before an audit starts;
a browser that fails leaves no partial file and its output is in the error; ``fairengine
report --pdf`` prints a real report on disk; and the real COMPAS audit (race x sex, as
``benchmarks/decision_stability.py`` runs it) through the CLI with ``--pdf`` writes
``report.pdf`` beside ``report.html`` and logs it to the MLflow run as ``audit/report.pdf``.
Each PDF must open: poppler's ``pdftoppm`` renders page 1 (saved under ``test-artifacts/``) and
``pdftotext`` finds the verdict on it.

``.ci/run`` installs Chromium and poppler-utils; on a developer machine without them the tests
that need them are skipped with that reason. Under CI (``CI`` set) a missing tool is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from test_report_browser import ARTIFACTS, chromium_path

from fairengine.dataset import AuditDataset
from fairengine.group_parity import group_parity
from fairengine.results import AuditResult
from fairengine.roles import ColumnRoles
from fairengine.verdict import finalize_audit
from tasks.report import write_report
from tasks.report_pdf import (
    BROWSER_ENV,
    ReportPdfError,
    find_browser,
    printable_html,
    write_pdf,
)

REPO = Path(__file__).resolve().parents[1]


def poppler(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is not installed; .ci/run installs Debian's poppler-utils")
        pytest.skip(f"{tool} is not installed (apt-get install poppler-utils); CI installs it")
    return path


def cli(*args: str, env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env or dict(os.environ),
        timeout=timeout,
    )


def words(text: str) -> str:
    """``text`` with every run of white space one space (pdftotext breaks lines)."""
    return re.sub(r"\s+", " ", text).strip()


def check_pdf_opens(pdf: Path, png_name: str, verdict: str, summary: str) -> str:
    """Render page 1 of ``pdf`` to ``test-artifacts/<png_name>`` and return page 1's text,
    which must hold the verdict word and summary."""
    head = pdf.read_bytes()[:5]
    assert head == b"%PDF-", head
    ARTIFACTS.mkdir(exist_ok=True)
    stem = ARTIFACTS / Path(png_name).stem
    render = ["-f", "1", "-l", "1", "-r", "80", "-png", "-singlefile", str(pdf), str(stem)]
    subprocess.run(
        [poppler("pdftoppm"), *render],
        check=True,
        capture_output=True,
        timeout=120,
    )
    png = stem.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    text = subprocess.run(
        [poppler("pdftotext"), "-f", "1", "-l", "1", "-layout", str(pdf), "-"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert verdict.upper() in text, text[:2000]
    assert words(summary) in words(text), (summary, text[:2000])
    return text


# --------------------------------------------------------------------------- no browser, broken


def test_every_details_block_is_opened_for_print() -> None:
    html = '<details class="x"><summary>a</summary>b</details><details>c</details><p>details</p>'
    assert printable_html(html) == (
        '<details open class="x"><summary>a</summary>b</details>'
        "<details open>c</details><p>details</p>"
    )


def test_no_browser_is_a_clear_error_naming_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    monkeypatch.delenv(BROWSER_ENV, raising=False)
    with pytest.raises(ReportPdfError) as err:
        find_browser()
    message = str(err.value)
    for needed in ("Chromium", "chromium, chromium-browser, google-chrome", "on PATH"):
        assert needed in message
    assert "apt-get install chromium" in message and BROWSER_ENV in message
    assert "report.pdf: false" in message
    monkeypatch.setenv(BROWSER_ENV, str(tmp_path / "no-such-chrome"))
    with pytest.raises(ReportPdfError, match=f"{BROWSER_ENV}=.*no-such-chrome.*not an executable"):
        find_browser()


def fake_browser(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-chromium"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_a_browser_that_fails_leaves_no_file_and_its_output_is_in_the_error(
    tmp_path: Path,
) -> None:
    target = tmp_path / "out" / "report.pdf"
    crashing = fake_browser(tmp_path, 'echo "GPU process isn\'t usable. Goodbye." >&2; exit 133')
    with pytest.raises(ReportPdfError, match=r"(?s)exit status 133, no PDF written.*Goodbye"):
        write_pdf("<html></html>", target, browser=crashing)
    silent = fake_browser(tmp_path, "exit 0")  # "succeeds" without printing anything
    with pytest.raises(ReportPdfError, match="no PDF written"):
        write_pdf("<html></html>", target, browser=silent)
    hanging = fake_browser(tmp_path, "sleep 30")
    with pytest.raises(ReportPdfError, match="within 1 s"):
        write_pdf("<html></html>", target, browser=hanging, timeout=1)
    assert not target.exists() and not list(tmp_path.glob("out/*"))


def small_config(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["female", "male"], n),
            "y": rng.binomial(1, 0.4, n),
            "score": rng.random(n),
        }
    )
    frame.to_csv(tmp_path / "data.csv", index=False)
    cfg = {
        "data": {"path": "data.csv"},
        "columns": {"label": "y", "protected": ["sex"], "score": "score"},
        "mlflow": {"enabled": False},
        "report": {"pdf": True},
    }
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_without_a_browser_stops_before_the_audit_with_the_reason(tmp_path: Path) -> None:
    """``report.pdf: true`` (or ``--pdf``) without Chromium is found by the checks that run
    before Prefect starts: exit status 2, the message names the missing browser."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    env.pop(BROWSER_ENV, None)
    r = cli("audit", "--config", str(small_config(tmp_path)), env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "fairengine: error: the report's PDF (report.pdf: true, --pdf) needs a Chromium" in (
        r.stderr
    )
    assert "Starting the audit flow" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "reports").exists()

    r = cli("report", "--pdf", "--result", str(tmp_path / "nope" / "audit.json"), env=env)
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr
    r = cli("report", "--result", str(tmp_path))
    assert r.returncode == 2 and "--pdf" in r.stderr  # the form to write is named


@pytest.mark.flow
def test_a_browser_failing_during_the_audit_leaves_the_audit_and_says_why(tmp_path: Path) -> None:
    """Chromium found before the audit but failing when it prints: the audit's outputs are
    written (and would be logged) without the PDF, and the outcome says why."""
    crashing = fake_browser(tmp_path, 'echo "Trace/breakpoint trap" >&2; exit 133')
    env = {**os.environ, BROWSER_ENV: crashing}
    config = small_config(tmp_path)
    r = cli("audit", "--config", str(config), "--output-dir", str(tmp_path / "reports"), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PDF:         not written: " in r.stdout and "exit status 133" in r.stdout
    (folder,) = (tmp_path / "reports").iterdir()
    assert (folder / "report.html").is_file() and (folder / "audit.json").is_file()
    assert not (folder / "report.pdf").exists()


def test_config_typo_in_the_report_section_gets_a_did_you_mean(tmp_path: Path) -> None:
    from fairengine.config import AuditConfig
    from fairengine.errors import ConfigError

    assert AuditConfig.from_dict({}).report.pdf is False
    with pytest.raises(ConfigError, match=r"did you mean 'report\.pdf'"):
        AuditConfig.from_dict({"report": {"pfd": True}})
    with pytest.raises(ConfigError, match=r"'report\.pdf' must be true or false"):
        AuditConfig.from_dict({"report": {"pdf": "yes"}})


# --------------------------------------------------------------------------- real reports


def compas_frame(shared_dir: Path) -> pd.DataFrame:
    """COMPAS two-year file as ``benchmarks/decision_stability.py`` scores it."""
    df = pd.read_csv(shared_dir / "data" / "compas" / "compas-scores-two-years.csv.gz")
    df = df.loc[:, ~df.columns.duplicated()]
    df = df[["sex", "race", "age_cat", "decile_score", "two_year_recid"]].copy()
    df["score"] = df["decile_score"] / 10
    return df


def test_fairengine_report_pdf_prints_a_report_on_disk(tmp_path: Path, shared_dir: Path) -> None:
    """Group parity of COMPAS (race x sex) rendered to report.html; ``fairengine report --pdf
    --result <audit.json>`` writes report.pdf beside it, and it opens with the verdict."""
    chromium_path()
    frame = compas_frame(shared_dir)
    roles = ColumnRoles(label="two_year_recid", protected=("race", "sex"), score="score")
    ds = AuditDataset.from_frame(frame, roles, threshold=0.45, min_group_size=10)
    result = finalize_audit(
        config={"columns": {"protected": ["race", "sex"]}},
        dataset={**ds.summary(), "name": "compas"},
        model={},
        validation=None,
        methods=[group_parity(ds, tolerance=0.05)],
    )
    folder = tmp_path / result.audit_id
    write_report(result, folder)
    (folder / "audit.json").write_text(result.to_json(), encoding="utf-8")
    r = cli("report", "--pdf", "--result", str(folder / "audit.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    pdf = folder / "report.pdf"
    assert f"PDF:         {pdf}" in r.stdout
    check_pdf_opens(pdf, "report-pdf-command-page1.png", "FAIL", result.verdict.summary)

    other = tmp_path / "filed" / "compas.pdf"  # --output elsewhere; the folder works as --result
    r = cli("report", "--pdf", "--result", str(folder), "--output", str(other))
    assert r.returncode == 0 and other.read_bytes()[:5] == b"%PDF-", r.stderr


@pytest.mark.flow
def test_the_compas_audit_with_pdf_writes_and_logs_a_pdf_that_opens(
    tmp_path: Path, shared_dir: Path
) -> None:
    """``fairengine audit --pdf`` on COMPAS (race x sex, every default method): report.pdf
    beside report.html, the same bytes logged as ``audit/report.pdf`` on the MLflow run, with
    the findings table; pdftoppm renders page 1 and it shows the verdict."""
    from mlflow import MlflowClient

    from tasks.mlflow_log import FINDINGS_TABLE, PDF_ARTIFACT
    from tasks.settings import default_tracking_uri

    chromium_path()
    compas_frame(shared_dir).to_csv(tmp_path / "compas_scored.csv", index=False)
    cfg = {
        "data": {"path": "compas_scored.csv"},
        "columns": {"label": "two_year_recid", "protected": ["race", "sex"], "score": "score"},
        "threshold": 0.45,
        "validation": {"min_group_size": 10},
        "methods": {"intersectional": {"attributes": ["race", "sex"]}},
        "cache": {"enabled": False},
        "mlflow": {"experiment": "t-report-pdf"},
        "output": {"dir": "reports"},
    }
    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump(cfg))
    r = cli("audit", "--config", str(config), "--pdf")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (folder,) = (tmp_path / "reports").iterdir()
    pdf = folder / "report.pdf"
    assert f"PDF:         {pdf}" in r.stdout and "audit/report.pdf" in r.stdout
    result = AuditResult.from_json((folder / "audit.json").read_text(encoding="utf-8"))
    assert result.config["report"] == {"pdf": True}  # recorded like every setting
    assert len(result.findings()) > 100  # the real COMPAS audit
    text = check_pdf_opens(
        pdf, "report-pdf-compas-page1.png", result.verdict.status, result.verdict.summary
    )
    assert "compas_scored.csv" in text  # the data's identity is on page 1 too

    uri = default_tracking_uri()
    client = MlflowClient(tracking_uri=uri)
    run_id = re.search(r"MLflow run:\s+(\w+)", r.stdout).group(1)  # type: ignore[union-attr]
    listed = {a.path for a in client.list_artifacts(run_id, "audit")}
    assert {PDF_ARTIFACT, FINDINGS_TABLE, "audit/report.html"} <= listed
    logged = client.download_artifacts(run_id, PDF_ARTIFACT, str(tmp_path / "dl"))
    assert Path(logged).read_bytes() == pdf.read_bytes()
    table = client.download_artifacts(run_id, FINDINGS_TABLE, str(tmp_path / "dl"))
    assert len(json.loads(Path(table).read_text())["data"]) == len(result.findings())


def test_fairengine_log_records_the_pdf_beside_the_audit(tmp_path: Path) -> None:
    """An audit saved while MLflow was down is logged later with its PDF when one is there."""
    from mlflow import MlflowClient

    from flows.cli import main
    from tasks.mlflow_log import PDF_ARTIFACT
    from tasks.settings import default_tracking_uri

    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {"g": rng.choice(["a", "b"], 500), "y": rng.binomial(1, 0.5, 500), "s": rng.random(500)}
    )
    ds = AuditDataset.from_frame(
        frame, ColumnRoles(label="y", protected=("g",), score="s"), threshold=0.5
    )
    result = finalize_audit(
        config={"mlflow": {"experiment": "t-log-pdf", "tag_model_version": False}},
        dataset={**ds.summary(), "name": "log-pdf"},
        model={},
        validation=None,
        methods=[group_parity(ds, tolerance=0.05)],
    )
    folder = tmp_path / result.audit_id
    write_report(result, folder)
    (folder / "audit.json").write_text(result.to_json(), encoding="utf-8")
    (folder / "report.pdf").write_bytes(b"%PDF-1.4\n% printed earlier\n%%EOF\n")
    uri = default_tracking_uri()
    assert main(["log", "--result", str(folder / "audit.json"), "--tracking-uri", uri]) == 0
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("t-log-pdf").experiment_id])
    got = client.download_artifacts(run.info.run_id, PDF_ARTIFACT, str(tmp_path / "dl"))
    assert Path(got).read_bytes() == (folder / "report.pdf").read_bytes()
