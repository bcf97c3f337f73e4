"""``report.md`` → ``report.html``: CommonMark (with tables) by markdown-it-py, plus the plot.

The Markdown is rendered by a real parser, so emphasis, code blocks, lists and tables come out
as HTML elements, never as literal ``**`` or ``|``. The Markdown carries one marker comment
(``PLOT_MARKER``) where the interactive front goes; the HTML replaces it with the plot's
``<div>`` (``optimizer.report_plot``). Raw HTML in the Markdown is allowed only because every
string the report interpolates is escaped before it gets there (``md_escape``).
"""

from __future__ import annotations

import html

from markdown_it import MarkdownIt

__all__ = ["PLOT_MARKER", "md_escape", "to_html"]

#: Where the interactive plot goes (an HTML comment: invisible in report.md).
PLOT_MARKER = "<!-- kvplan:front-plot -->"

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:76rem;margin:2rem auto;padding:0 1rem;"
    "line-height:1.45}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;"
    "padding:.25rem .5rem;font-size:.85rem;text-align:left}pre{background:#f4f4f4;"
    "padding:.5rem;white-space:pre-wrap;font-size:.8rem}code{font-size:.85em}"
)


def md_escape(text: str) -> str:
    """``text`` safe inside Markdown: HTML-escaped, and Markdown's emphasis/table characters
    backslash-escaped, so names like ``s3_fifo`` or ``a|b`` stay literal."""
    escaped = html.escape(str(text), quote=False)
    for char in "\\`*_|[]":
        escaped = escaped.replace(char, "\\" + char)
    return escaped


def to_html(title: str, markdown: str, plot_div: str | None) -> str:
    """A complete HTML page of ``markdown`` with ``plot_div`` at ``PLOT_MARKER``."""
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    if PLOT_MARKER in body:
        body = body.replace(PLOT_MARKER, plot_div or "")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>\n{body}</body></html>\n"
    )
