"""Evaluation reports: files a person reads after `sqlenv eval --report DIR` or `sqlenv compare`.

`write_report(result, directory)` writes

- `results.json` — everything in `EvaluationResult.to_json()` (summary, by difficulty / answer
  type / database / train overlap, format-error rate, every episode with its transcript), and
  `episode_patterns`: how episodes ended, the actions they used, the patterns they show and what
  followed the first failed query (`sqlenv.evaluation.patterns`);
- `summary.md` — markdown tables: overall, by difficulty, by answer type, by database, (when
  some questions share their gold SQL with a train question) by overlap with the train split,
  then how episodes ended, the actions they used, the patterns they show and what followed the
  first failed query;
- `success_by_difficulty.png`, `reward_distribution.png`, `steps_histogram.png` (matplotlib,
  drawn on Agg figures without touching pyplot's global state);
- `transcripts.html` — one self-contained page (inline CSS and script, every text escaped): each
  episode's question, failure patterns, actions, results, rewards and verdict, filterable by
  outcome and text (a pattern's name finds the episodes that show it).

`read_results(path)` reads a results.json back (for `sqlenv patterns`); `read_report_json` and
`results_from_json` are its two halves, for a reader that parses a file once and then decides what
it holds (the pass rates, `sqlenv.training.pass_rates`).

`write_comparison(results, directory)` writes `compare.json` and `compare.png` for several
policies played on the same questions with the same seeds. Plots need matplotlib (the `eval`
extra); without it the other files are still written and the plots are reported as skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlenv.evaluation.patterns import pattern_summary
from sqlenv.evaluation.records import EpisodeRecord, EvaluationResult
from sqlenv.evaluation.reports.html import transcripts_html
from sqlenv.evaluation.reports.markdown import summary_markdown
from sqlenv.evaluation.reports.names import PLOT_FILES
from sqlenv.evaluation.reports.plots import plot_run


@dataclass
class ReportFiles:
    """What a report wrote (paths) and what it skipped (with the reason)."""

    directory: Path
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def write_report(result: EvaluationResult, directory: str | Path) -> ReportFiles:
    """Write results.json, summary.md, three PNG plots and transcripts.html into `directory`."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(out)

    def write_text(name: str, text: str) -> None:
        path = out / name
        path.write_text(text, encoding="utf-8")
        files.written.append(path)

    data = {**result.to_json(), "episode_patterns": pattern_summary(result.episodes)}
    write_text("results.json", json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    write_text("summary.md", summary_markdown(result))
    write_text("transcripts.html", transcripts_html(result))
    try:
        files.written += plot_run(result, out)
    except ImportError:
        files.skipped += [f"{name} (matplotlib missing: pip install 'sqlenv[eval]')" for name in PLOT_FILES]
    return files


@dataclass(frozen=True)
class SavedResults:
    """The episodes of a results.json that a report wrote, with the policy that played them, and
    where and how: the dataset and split, and the decoding ("greedy", "temperature T"; None for
    policies that generate no text, and for results written before it was recorded)."""

    path: Path
    policy: str
    episodes: list[EpisodeRecord]
    dataset: str = "?"
    split: str = "?"
    decoding: str | None = None


def read_report_json(path: str | Path) -> tuple[Path, Any]:
    """Parse a report's results.json (or the JSON file named), once.

    Args:
        path: a JSON file, or a report folder holding results.json.

    Returns:
        (the file read, its parsed JSON).

    Raises:
        ValueError: the file is missing, unreadable or not JSON, saying which.
    """
    source = Path(path)
    if source.is_dir():
        source = source / "results.json"
    try:
        return source, json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{source}: no such file") from None
    except OSError as error:
        raise ValueError(f"{source} cannot be read: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{source} is not JSON: {error}") from None


def read_results(path: str | Path) -> SavedResults:
    """Read back a report's results.json; ValueError (saying what is wrong) for anything else."""
    return results_from_json(*read_report_json(path))


def results_from_json(source: Path, data: Any) -> SavedResults:
    """The saved results in the parsed JSON of `source`; ValueError when it is no results.json."""
    if not isinstance(data, dict) or not isinstance(data.get("episodes"), list):
        raise ValueError(f"{source} is not an evaluation's results.json (it has no list of episodes)")
    try:
        episodes = [EpisodeRecord.from_json(e) for e in data["episodes"]]
    except (TypeError, ValueError) as error:  # a missing or unknown field, a step that is no object
        raise ValueError(f"{source}: an episode is not an episode record ({error})") from None
    for episode in episodes:  # what the pattern counts read as text
        texts = [*episode.actions, *(t for step in episode.transcript for t in (step.action, step.error))]
        if not all(isinstance(t, str) for t in texts):
            raise ValueError(
                f"{source}: episode {episode.question_id!r} has an action or error that is not text"
            )
    return SavedResults(
        source,
        str(data.get("policy", "?")),
        episodes,
        dataset=str(data.get("dataset", "?")),
        split=str(data.get("split", "?")),
        decoding=data.get("decoding"),
    )
