"""Evaluation reports: the files a person reads after `sqlenv eval --report DIR` or `sqlenv compare`
(`files`: results.json, summary.md, plots, transcripts.html; `compare`: several policies side by
side). Plots need matplotlib (the `eval` extra); without it the other files are still written."""

from sqlenv.evaluation.reports.compare import comparison_json, write_comparison
from sqlenv.evaluation.reports.files import ReportFiles, SavedResults, read_results, write_report
from sqlenv.evaluation.reports.html import transcripts_html
from sqlenv.evaluation.reports.markdown import episode_markdown, summary_markdown
from sqlenv.evaluation.reports.names import PLOT_FILES, report_title, slug

__all__ = [
    "PLOT_FILES",
    "ReportFiles",
    "SavedResults",
    "comparison_json",
    "episode_markdown",
    "read_results",
    "report_title",
    "slug",
    "summary_markdown",
    "transcripts_html",
    "write_comparison",
    "write_report",
]
