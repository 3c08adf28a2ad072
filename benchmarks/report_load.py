"""The run report's size and how fast Chromium shows it (``python -m agents.view``'s page).

    python benchmarks/report_load.py runs/train/sokoban-ppo                # prints one JSON object
    python benchmarks/report_load.py runs/train/sokoban-ppo --copies 10    # the episodes 10 times over

Builds the report of the run (its tokenizer from config.yaml, as ``agents.view`` does), writes it to a
temporary file and opens it ``--loads`` times in headless Chromium (``/usr/bin/chromium``), a fresh page
each time. The load time is ``performance.now()`` when the page's script has drawn the curves and the
first page of the episode list (``document.body.dataset.readyMs``: from navigation start, so parsing the
HTML and the embedded JSON is included); the median and the range are printed. ``--copies`` repeats the
episodes to see how a big run's page behaves (the list is paged, the token view built on opening).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a run directory (metrics.jsonl, evaluations/, samples/)")
    parser.add_argument("--loads", type=int, default=5, help="page loads timed")
    parser.add_argument("--copies", type=int, default=1, help="how many times the run's episodes are repeated")
    return parser.parse_args()


def build_page(run_dir: Path, copies: int) -> tuple[str, int, float]:
    """The page's HTML, its number of episodes and the seconds the report took to build (tokenizer included)."""
    from agents.report.page import build_report, render_html

    started = time.perf_counter()
    report = build_report(run_dir)
    report.episodes = report.episodes * copies
    html = render_html(report)
    return html, len(report.episodes), time.perf_counter() - started


def time_loads(page: Path, loads: int) -> list[float]:
    """Milliseconds from navigation start to the drawn episode list, one per fresh load."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1600"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        times = []
        for _ in range(loads + 1):  # the first load warms the browser's caches and is not counted
            driver.get("about:blank")
            driver.get(page.as_uri())
            rows = driver.execute_script("return document.querySelectorAll('#episode-list tbody tr').length")
            if not rows:
                raise RuntimeError("the page drew no episode rows")
            times.append(float(driver.execute_script("return document.body.dataset.readyMs")))
        return times[1:]
    finally:
        driver.quit()


def main() -> int:
    args = parse_args()
    sys.path.insert(0, str(REPO))
    html, episodes, build_s = build_page(args.run_dir, args.copies)
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "report.html"
        page.write_text(html, encoding="utf-8")
        load_ms = time_loads(page, args.loads)
    result = {
        "run_dir": str(args.run_dir),
        "episodes": episodes,
        "html_bytes": len(html.encode("utf-8")),
        "build_s": round(build_s, 2),
        "load_ms_median": round(statistics.median(load_ms), 1),
        "load_ms_min": round(min(load_ms), 1),
        "load_ms_max": round(max(load_ms), 1),
        "loads": len(load_ms),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
