"""`tuner dashboard` in headless Chromium, on a database one real study (two vLLM starts) filled."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tuner.store import ResultStore
from tuner.store.db import open_read_only

from .conftest import ENV, Dashboard, Page

pytestmark = pytest.mark.integration

WORKLOAD_TYPE = "code"  # workloads/code.jsonl
CHARTS = ["chart-tokens-per-k", "chart-acceptance", "chart-pareto", "chart-history"]
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def one(rows: list[dict], dashboard: Dashboard) -> dict:
    (row,) = [r for r in rows
              if r["model"] == dashboard.model and r["workload_type"] == WORKLOAD_TYPE]
    return row


def api_best(dashboard: Dashboard) -> dict:
    response = httpx.get(dashboard.base_url + "/api/best", timeout=30)
    assert response.status_code == 200, response.text[:1000]
    return one(response.json(), dashboard)


def cli_best(dashboard: Dashboard) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "best", "--json", "--db", dashboard.db_url],
        capture_output=True, text=True, env=ENV, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return one(json.loads(result.stdout), dashboard)


def stored_trials(dashboard: Dashboard):
    return ResultStore(open_read_only(dashboard.db_url)).trials(study_name=dashboard.study["study"])


def words(text: str) -> str:
    return " ".join(text.split())


def query(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


def cell_selector(dashboard: Dashboard) -> str:
    return f'#overview td.cell[data-model="{dashboard.model}"][data-type="{WORKLOAD_TYPE}"]'


def open_model_page(pw, dashboard: Dashboard) -> None:
    pw.goto(dashboard.base_url + "/")
    pw.locator(cell_selector(dashboard) + " a.cell-link").click()
    pw.wait_for_url(re.compile(r"/model\?"))
    assert query(pw.url) == {"model": dashboard.model, "type": WORKLOAD_TYPE}


def open_trial_page(pw, dashboard: Dashboard, number: int) -> None:
    """Overview -> model page -> the newest study -> trial `number`, by clicking links."""
    open_model_page(pw, dashboard)
    pw.locator("#study-link").click()
    pw.wait_for_url(re.compile(r"/study\?"))
    assert query(pw.url)["name"] == dashboard.study["study"]
    pw.locator(f'#trials tr.trial[data-number="{number}"] a.trial-link').click()
    pw.wait_for_url(re.compile(r"/trial\?"))
    assert query(pw.url) == {"study": dashboard.study["study"], "number": str(number)}


def contains(found, expected: dict) -> bool:
    """`expected` is `found`, its top-level items are among found's, or it is nested inside."""
    if isinstance(found, dict):
        if expected.items() <= found.items():
            return True
        return any(contains(v, expected) for v in found.values())
    if isinstance(found, list):
        return any(contains(v, expected) for v in found)
    return False


def test_overview_names_the_stored_winner(page: Page, dashboard: Dashboard):
    pw = page.page
    response = pw.goto(dashboard.base_url + "/")
    assert response is not None and response.status == 200
    cell = pw.locator(cell_selector(dashboard))
    assert cell.count() == 1, f"no single overview cell for {dashboard.model} / {WORKLOAD_TYPE}"

    cli = cli_best(dashboard)
    api = api_best(dashboard)
    assert cli["study"] == dashboard.study["study"]
    expected = None if cli["keep_speculation_off"] else cli["winner"]["label"]
    assert api["winner"]["label"] == cli["winner"]["label"]  # /api/best is `tuner best --json` plus the cell
    assert api["winner_label"] == (expected or "speculation off")
    assert api["speedup"] == (None if cli["speedup"] is None else pytest.approx(cli["speedup"]))
    assert words(api["serve_command"]) == words(cli["serve_command"])
    if expected is None:
        assert "speculation off" in cell.inner_text()
    else:
        assert expected in cell.inner_text() and "speculation off" not in cell.inner_text()
    href = cell.locator("a.cell-link").get_attribute("href")
    assert href is not None and href.startswith("/model?")
    assert query(href) == {"model": dashboard.model, "type": WORKLOAD_TYPE}


def test_model_page_draws_its_charts_and_copies_the_serve_command(page: Page, dashboard: Dashboard):
    pw = page.page
    open_model_page(pw, dashboard)
    serve = pw.locator("#winner #serve-command").inner_text()
    assert words(serve) == words(api_best(dashboard)["serve_command"])
    assert words(serve).startswith("vllm serve ")

    for chart in CHARTS:
        svg = pw.locator(f"svg#{chart}")
        assert svg.count() == 1, f"no <svg id={chart}>"
        area = svg.bounding_box()
        assert area and area["width"] > 0 and area["height"] > 0, f"{chart} is not laid out: {area}"
        marks = svg.locator(".mark")
        assert marks.count() >= 1, f"{chart} draws no .mark"
        drawn = []
        for i in range(marks.count()):
            box = marks.nth(i).bounding_box()
            if not box or max(box["width"], box["height"]) <= 0:
                continue
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            if (area["x"] - 1 <= x <= area["x"] + area["width"] + 1
                    and area["y"] - 1 <= y <= area["y"] + area["height"] + 1):
                drawn.append(box)
        assert drawn, f"{chart}: none of its {marks.count()} marks has a size inside the chart"

    pw.locator("#copy-serve").click()
    pw.wait_for_timeout(300)  # a page error raised by the click's handler arrives asynchronously
    assert page.errors == []
    assert words(pw.evaluate("navigator.clipboard.readText()")) == words(serve)


def test_clicking_through_to_a_trial_shows_its_real_server_log(page: Page, dashboard: Dashboard):
    pw = page.page
    rows = stored_trials(dashboard)
    speculative = next(r for r in rows if r.config and r.status == "complete")
    open_model_page(pw, dashboard)
    pw.locator("#study-link").click()
    pw.wait_for_url(re.compile(r"/study\?"))
    listed = {(int(row.get_attribute("data-number")), row.get_attribute("data-status"))
              for row in pw.locator("#trials tr.trial").all()}
    assert listed == {(r.optuna_trial_number, r.status) for r in rows}

    number = speculative.optuna_trial_number
    pw.locator(f'#trials tr.trial[data-number="{number}"] a.trial-link').click()
    pw.wait_for_url(re.compile(r"/trial\?"))
    tail = pw.locator("#log-tail").inner_text()
    config = pw.locator("#config").inner_text()

    log = Path(speculative.server_log_path)
    assert log.is_relative_to(dashboard.log_dir) and log.is_file()
    logged = [ANSI.sub("", line).strip() for line in log.read_text(errors="replace").splitlines()]
    logged = [line for line in logged if line]
    shown = [ANSI.sub("", line).strip() for line in tail.splitlines() if line.strip()]
    assert shown, "#log-tail is empty"
    # The tail ends where the log ends, and what it shows was written by vLLM.
    assert shown[-1] == logged[-1], f"#log-tail does not end as {log} does:\n{tail[-2000:]}"
    assert sum(line in set(logged) for line in shown) >= len(shown) / 2, tail[-2000:]
    assert contains(json.loads(config), speculative.config), config
    # Its tokens per step by context length, as stored from its requests' streams.
    cells = pw.locator("#by-context tr td:nth-child(3)").all_inner_texts()
    stored = [f"{b['tokens_per_step']:.2f} ({b['steps']})" for b in speculative.acceptance_by_context]
    assert cells[:len(stored)] == stored and stored, cells
    rates = pw.locator("#by-context tr td:nth-child(4)").all_inner_texts()
    timed = [f"{b['tokens_per_s']:.0f}" if b.get("tokens_per_s") else "–" for b in speculative.acceptance_by_context]
    assert rates[:len(timed)] == timed and any(r != "–" for r in timed), rates


def test_no_page_asks_another_host_for_anything(page: Page, dashboard: Dashboard):
    pw = page.page
    speculative = next(r for r in stored_trials(dashboard) if r.config)
    open_trial_page(pw, dashboard, speculative.optuna_trial_number)
    pw.wait_for_load_state("networkidle")

    assert page.requests, "the page recorded no request"
    local = (dashboard.base_url + "/", "data:", "about:")
    elsewhere = [url for url in page.requests if not url.startswith(local)]
    assert elsewhere == []
    assert page.errors == []
