"""The run report (``python -m agents.view``): a run's curves, episodes and tokens in one HTML page."""

from agents.report.page import REPORT_FILE, Report, build_report, render_html, write_report

__all__ = ["REPORT_FILE", "Report", "build_report", "render_html", "write_report"]
