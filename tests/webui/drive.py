"""Drives Debian's chromium (headless, through chromium-driver and Selenium)
over gpuwatch's web view and prints what a person would see, as JSON, for
tests/webui.rs to check against the agent's own API.

    drive.py URL --screenshot PNG [--chart-points N] [--alert NAME] [--mark TEXT]
             [--workloads N] [--click CSS] [--timeout S]

Waits until the GPU table is filled, and optionally until every chart has at
least N points, until alert NAME shows as firing and until the list of
chart marks has an entry containing TEXT, and until the Workloads table has
N rows; then clicks the first element matching CSS (when given), reads the
page again ("after_click") and saves a full-page screenshot. The JSON says what was still missing when the time ran out
("missing"), every browser console entry ("console"), the table's cells, the
charts' point counts, the alerts shown and whether the history-off note is
visible.
"""

import argparse
import json
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1400,1000",
]

READ_PAGE = """
const text = (node) => node ? node.textContent.trim() : null;
const rows = [...document.querySelectorAll('#gpus tbody tr')].map((tr) => {
  const cells = {};
  for (const td of tr.querySelectorAll('td[data-field]')) cells[td.dataset.field] = {text: text(td), class: td.className};
  return {gpu: tr.dataset.gpu, cells};
});
const charts = {};
for (const c of document.querySelectorAll('.chart')) charts[c.dataset.metric] = Number(c.dataset.points || 0);
const alerts = [...document.querySelectorAll('#alerts .alert')].map((a) => ({alertname: a.dataset.alertname, state: a.dataset.state, text: text(a)}));
const note = document.querySelector('#history-off');
return {
  title: document.title,
  status: text(document.querySelector('#status')),
  rows, charts, alerts,
  canvases: document.querySelectorAll('#charts canvas').length,
  history_note_visible: !!note && !note.hidden && note.offsetParent !== null,
  history_note: text(note),
  processes: document.querySelectorAll('#process-table tbody tr').length,
  gpu_pods: [...document.querySelectorAll('#gpus tbody tr')].map((r) => text(r.querySelector('[data-field="pods"]') || document.createElement('i'))),
  process_headers: [...document.querySelectorAll('#process-table thead th')].map(text),
  process_rows: [...document.querySelectorAll('#process-table tbody tr')].map((r) => [...r.querySelectorAll('td')].map(text)),
  alert_history: document.querySelectorAll('#alert-history tbody tr').length,
  events: [...document.querySelectorAll('#events li')].map(text),
  workloads: [...document.querySelectorAll('#workload-table tbody tr')].map((tr) => {
    const cells = {};
    for (const td of tr.querySelectorAll('td[data-field]')) cells[td.dataset.field] = text(td);
    const bar = tr.querySelector('td[data-field="efficiency"] .bar > span');
    return {kind: tr.dataset.kind, id: tr.dataset.id, id_text: text(tr.querySelector('.id')),
      command: text(tr.querySelector('.command')), gpus: tr.dataset.gpus, chosen: tr.classList.contains('chosen'),
      bar_width: bar ? bar.style.width : null, cells};
  }),
  workload_filter: (() => { const f = document.querySelector('#workload-filter'); return f && !f.hidden ? text(f) : null; })(),
  workload_links: [...document.querySelectorAll('#gpus tbody tr')].map((r) =>
    [...r.querySelectorAll('a.workload-link')].map((a) => ({gpu: r.dataset.gpu, workload: a.dataset.workload, text: text(a)}))).flat(),
  injected_elements: document.querySelectorAll('#workloads img, #gpus img, #processes img').length,
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
};
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--chart-points", type=int, default=0)
    parser.add_argument("--alert")
    parser.add_argument("--mark", help="wait until the chart marks list has an entry containing this")
    parser.add_argument("--workloads", type=int, default=0, help="wait until the Workloads table has this many rows")
    parser.add_argument("--click", help="then click the first element matching this CSS selector")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.TemporaryDirectory(prefix="gpuwatch-chromium-")
    options.add_argument(f"--user-data-dir={profile.name}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    console = []
    try:
        driver.get(args.url)
        deadline = time.monotonic() + args.timeout
        while True:
            console.extend(driver.get_log("browser"))
            page = driver.execute_script(READ_PAGE)
            missing = []
            if not page["rows"]:
                missing.append("GPU table rows")
            if args.chart_points:
                if not page["charts"]:
                    missing.append("charts")
                short = {m: n for m, n in page["charts"].items() if n < args.chart_points}
                if short:
                    missing.append(f"{args.chart_points} points in every chart (have {short})")
            if args.alert and not any(a["alertname"] == args.alert and a["state"] == "firing" for a in page["alerts"]):
                missing.append(f"alert {args.alert} firing")
            if args.mark and not any(args.mark in (e or "") for e in page["events"]):
                missing.append(f"chart mark {args.mark!r}")
            if len(page["workloads"]) < args.workloads:
                missing.append(f"{args.workloads} workload rows (have {len(page['workloads'])})")
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        # Let the last fetches land, then a full-page screenshot.
        time.sleep(0.5)
        if args.click and not missing:
            found = driver.execute_script(
                "const e = document.querySelector(arguments[0]); if (!e) return false; e.click(); return true;", args.click)
            if not found:
                missing.append(f"an element matching {args.click!r} to click")
            time.sleep(1.0)
            page["after_click"] = driver.execute_script(READ_PAGE)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1400, max(1000, min(int(height) + 40, 6000)))
        time.sleep(0.5)
        driver.save_screenshot(args.screenshot)
        console.extend(driver.get_log("browser"))
        page["missing"] = missing
        page["console"] = console
        json.dump(page, sys.stdout)
    finally:
        driver.quit()
        profile.cleanup()


if __name__ == "__main__":
    main()
