"""The markdown of a report: `summary.md`'s tables (overall, by difficulty, answer type, database,
train overlap, how episodes ended, their patterns) and one episode as markdown."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlenv.agents.reply_formats import CALL_FORMATS
from sqlenv.evaluation.patterns import (
    ACTION_KINDS,
    FAILED_QUERY,
    TRANSCRIPT_PATTERNS,
    pattern_summary,
)
from sqlenv.evaluation.records import GOLD_EMPTY, SEEN_IN_TRAIN, EpisodeRecord, EvaluationResult
from sqlenv.evaluation.reports.names import PLOT_FILES, report_title


def _call_formats_text(formats: dict[str, int]) -> str:
    """`tagged 120 (75.0 %), json 40 (25.0 %)`: accepted tool calls by the format they were written in."""
    total = sum(formats.values())
    order = [*CALL_FORMATS, *sorted(set(formats) - set(CALL_FORMATS))]  # the template's own format first
    return ", ".join(f"{name} {formats[name]} ({100 * formats[name] / total:.1f} %)" for name in order if name in formats)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table: the first column left-aligned, the others right-aligned; `|` in a cell
    escaped.

    Args:
        headers: the column headers.
        rows: the rows' cells, as text.

    Returns:
        The table's lines, joined by newlines.
    """
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if i else "---" for i in range(len(headers))) + "|",
    ]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _group_rows(groups: dict[str, dict[str, float]]) -> list[list[str]]:
    return [
        [
            name,
            str(int(g["n"])),
            f"{g['success_rate']:.3f}",
            f"{g['avg_reward']:.3f}",
            f"{g.get('avg_steps', 0.0):.2f}",
            f"{g.get('format_error_rate', 0.0):.3f}",
        ]
        for name, g in groups.items()
    ]


def summary_markdown(result: EvaluationResult) -> str:
    """The markdown summary: overall, then by difficulty, answer type, database and train overlap."""
    group_headers = ["episodes", "success", "mean reward", "mean steps", "format errors"]
    played = result.n_episodes - result.journal_episodes
    speed = f", {played / result.wall_time_s:.2f} episodes/s" if result.wall_time_s > 0 else ""
    timing = f"{result.wall_time_s:.2f} s{speed}"
    if result.journal_episodes and not played:  # reported from a journal alone (--journal-only)
        timing = f"all {result.journal_episodes} loaded from the journal of an earlier run, none played"
    elif result.journal_episodes:  # a continued run: its time covers only the episodes it played
        timing = (
            f"{result.journal_episodes} loaded from the journal of an earlier run, "
            f"{played} played in {timing}"
        )
    if result.planned_episodes:
        timing += (
            f". **A stopped run**: these are the first {result.n_episodes} of the "
            f"{result.planned_episodes} planned episodes, in the plan's order up to the first one "
            f"that had not finished; {result.finished_after_gap} that finished after it are left out "
            "(run in parallel, those are the short ones)"
        )
    parts = [
        f"# {report_title(result)}",
        "",
        f"{result.n_episodes} episodes, seed {result.seed}, backend {result.backend}, "
        + (f"replies generated with {result.engine}" if result.engine else "")
        + (f" in {result.dtype}" if result.engine and result.dtype else "")
        + (f", {result.decoding}" if result.engine and result.decoding else "")
        + (", " if result.engine else "")
        + f"{timing}. Format errors: share of actions whose policy output could not be parsed."
        + (
            " Answers were SQL statements graded by Spider's execution match: success is execution accuracy."
            if result.answer_mode == "sql"
            else ""
        )
        + (
            " The schema was shown: every episode's first observation held each table's CREATE TABLE "
            "statement (the control for hidden-schema runs, which see the table names only)."
            if result.show_schema
            else ""
        ),
        "",
        "## Overall",
        "",
        markdown_table(
            ["metric", "value"],
            [
                ["episodes", str(result.n_episodes)],
                [result.success_label, f"{result.success_rate:.3f}"],
                ["95 % interval (Wilson)", "{:.3f}–{:.3f}".format(*result.success_interval)],
                ["mean reward", f"{result.avg_reward:.3f}"],
                ["mean steps", f"{result.avg_steps:.2f}"],
                ["format-error rate", f"{result.format_error_rate:.3f}"],
                *(
                    [["tool calls by format", _call_formats_text(result.call_formats)]]
                    if result.call_formats
                    else []
                ),
            ],
        ),
    ]
    for heading, column, groups in (
        ("By difficulty", "difficulty", result.by_difficulty),
        ("By answer type", "answer type", result.by_answer_type),
        ("By database", "database", result.by_database),
    ):
        parts += ["", f"## {heading}", "", markdown_table([column, *group_headers], _group_rows(groups))]
    # Two splits of the questions that a report shows only where their telling group has questions.
    for heading, note, groups, telling in (
        (
            "By overlap with the train split",
            "Questions whose gold SQL is also a train question's (same database, same query once "
            "case, spacing and quoting are folded) can be solved by recalling a trained query; "
            "the others show what carries over.",
            result.by_train_overlap,
            SEEN_IN_TRAIN,
        ),
        (
            "By gold answer",
            "Where the gold query returns no rows, only an explicit empty answer is right, and a "
            "policy that answers empty after a failed query is right there without having explored; "
            "success on the questions whose gold answer has rows is free of that.",
            result.by_gold,
            GOLD_EMPTY,
        ),
    ):
        if groups.get(telling, {}).get("n"):
            parts += [
                "",
                f"## {heading}",
                "",
                note,
                "",
                markdown_table(["questions", *group_headers], _group_rows(groups)),
            ]
    parts += _patterns_markdown(result.episodes)
    parts += [
        "",
        "## Plots",
        "",
        *(f"![{name.removesuffix('.png').replace('_', ' ')}]({name})" for name in PLOT_FILES),
        "",
        "Every episode, step by step: [transcripts.html](transcripts.html).",
        "",
    ]
    return "\n".join(parts)


def _share(count: int, n: int) -> str:
    return f"{count / n:.3f}" if n else "0.000"


def _patterns_markdown(episodes: Sequence[EpisodeRecord]) -> list[str]:
    """How episodes ended, the actions they used and the patterns they show, as markdown."""
    summary = pattern_summary(episodes)
    n = summary["n"]
    if not n:
        return []
    ended = [[name, str(count), _share(count, n)] for name, count in summary["ended"].items()]
    actions = [
        [
            kind,
            str(summary["actions"][kind]["episodes"]),
            f"{summary['actions'][kind]['mean_per_episode']:.2f}",
        ]
        for kind in ACTION_KINDS
    ]
    patterns = [
        [
            name,
            str(p["episodes"]),
            _share(p["episodes"], n),
            f"{p['success_rate']:.3f}" if p["episodes"] else "–",
        ]
        for name, p in summary["patterns"].items()
    ]
    parts = [
        "",
        "## How episodes ended",
        "",
        markdown_table(["ending", "episodes", "share"], ended),
        "",
        "## Actions and patterns",
        "",
        markdown_table(["action", "episodes using it", "mean per episode"], actions),
        "",
        "An action sent again is compared as the environment's repeat penalty compares it (whitespace "
        "folded, a final `;` dropped), in the transcript's text of it. Success: the share of the "
        "episodes showing the pattern that were answered correctly.",
        "",
        markdown_table(["pattern", "episodes", "share", "success"], patterns),
    ]
    after = [
        [name, str(p["episodes"]), f"{p['success_rate']:.3f}" if p["episodes"] else "–"]
        for name, p in summary["after_first_failed_query"].items()
    ]
    if after and summary["patterns"][FAILED_QUERY]["episodes"]:
        parts += [
            "",
            "What each episode with a failed query did right after its first one (a query compared "
            "with the failed one as above, then with letter case and spacing ignored too):",
            "",
            markdown_table(["next step", "episodes", "success"], after),
        ]
    if not any(name in summary["patterns"] for name in TRANSCRIPT_PATTERNS):
        parts += ["", "The episodes have no transcripts: only format errors could be counted."]
    return parts


# ---- plots ------------------------------------------------------------------------------------


def episode_markdown(episode: EpisodeRecord) -> str:
    """One episode as markdown: the question, each action with what came back and its reward,
    and the verdict (training transcripts, docs/lab-notebook.md)."""
    lines = [
        f"**{episode.question_id}** ({episode.db_id}, {episode.difficulty}): {episode.question}",
        "",
    ]
    for n, step in enumerate(episode.transcript, start=1):
        lines.append(
            f"{n}. {code_span(shorten(' '.join(step.action.split()), 300))} → reward {step.reward:+.3f}"
        )
        shown = f"error: {step.error}" if step.error else step.result
        if shown:
            lines += ["", "   ```", *("   " + line for line in shorten(shown, 600).splitlines()), "   ```"]
    lines += [
        "",
        f"Verdict: **{episode.verdict or ('correct' if episode.success else 'wrong')}**; "
        f"total reward {episode.total_reward:.3f}; {episode.steps} steps; "
        f"{episode.format_errors} format errors.",
        "",
    ]
    return "\n".join(lines)


def code_span(text: str) -> str:
    """Inline code that survives backticks in the text (a longer fence than any run inside)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
