"""Render reproductions to ``report.html`` (self-contained), ``report.md`` and ``results.json``."""

from divelab.report.render import load_results, render_html, render_markdown, write_report

__all__ = ["load_results", "render_html", "render_markdown", "write_report"]
