"""The names a report uses: its title, its plot files, and file-safe policy names."""

from __future__ import annotations

import re

from sqlenv.evaluation.records import EvaluationResult

PLOT_FILES: tuple[str, ...] = ("success_by_difficulty.png", "reward_distribution.png", "steps_histogram.png")


def report_title(result: EvaluationResult) -> str:
    """A run's title: its policy, dataset and split, "SQL answers" for an execution-accuracy run
    and "schema shown" for the schema-shown control."""
    notes = (["SQL answers"] if result.answer_mode == "sql" else []) + (
        ["schema shown"] if result.show_schema else []
    )
    return f"{result.policy} on {result.dataset}/{result.split}" + (f" ({', '.join(notes)})" if notes else "")


def slug(name: str) -> str:
    """A file-name-safe version of a policy name (`openai:http://h:1/v1` -> `openai_http_h_1_v1`)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return cleaned or "policy"
