"""Evaluation reports: files a person reads after `sqlenv eval --report DIR` or `sqlenv compare`.

`write_report(result, directory)` writes

- `results.json` — everything in `EvaluationResult.to_json()` (summary, by difficulty / answer
  type / database / train overlap, format-error rate, every episode with its transcript), and
  `episode_patterns`: how episodes ended, the actions they used, the patterns they show and what
  followed the first failed query (`sqlenv.episode_patterns`);
- `summary.md` — markdown tables: overall, by difficulty, by answer type, by database, (when
  some questions share their gold SQL with a train question) by overlap with the train split,
  then how episodes ended, the actions they used, the patterns they show and what followed the
  first failed query;
- `success_by_difficulty.png`, `reward_distribution.png`, `steps_histogram.png` (matplotlib,
  drawn on Agg figures without touching pyplot's global state);
- `transcripts.html` — one self-contained page (inline CSS and script, every text escaped): each
  episode's question, failure patterns, actions, results, rewards and verdict, filterable by
  outcome and text (a pattern's name finds the episodes that show it).

`read_results(path)` reads a results.json back (for `sqlenv patterns`).

`write_comparison(results, directory)` writes `compare.json` and `compare.png` for several
policies played on the same questions with the same seeds. Plots need matplotlib (the `eval`
extra); without it the other files are still written and the plots are reported as skipped.
"""

from __future__ import annotations

import html
import json
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlenv.episode_patterns import (
    ACTION_KINDS,
    FAILED_QUERY,
    PATTERNS,
    TRANSCRIPT_PATTERNS,
    episode_pattern,
    pattern_summary,
)
from sqlenv.evaluation import SEEN_IN_TRAIN, EpisodeRecord, EvaluationResult

PLOT_FILES: tuple[str, ...] = ("success_by_difficulty.png", "reward_distribution.png", "steps_histogram.png")
_SUCCESS_COLOR = "#2a9d8f"
_FAILURE_COLOR = "#e76f51"
_REWARD_COLOR = "#264653"


@dataclass
class ReportFiles:
    """What a report wrote (paths) and what it skipped (with the reason)."""

    directory: Path
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def slug(name: str) -> str:
    """A file-name-safe version of a policy name (`openai:http://h:1/v1` -> `openai_http_h_1_v1`)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return cleaned or "policy"


# ---- the report of one run ------------------------------------------------------------------


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
        files.written += _plot_run(result, out)
    except ImportError:
        files.skipped += [f"{name} (matplotlib missing: pip install 'sqlenv[eval]')" for name in PLOT_FILES]
    return files


@dataclass(frozen=True)
class SavedResults:
    """The episodes of a results.json that a report wrote, with the policy that played them."""

    path: Path
    policy: str
    episodes: list[EpisodeRecord]


def read_results(path: str | Path) -> SavedResults:
    """Read back a report's results.json; ValueError (saying what is wrong) for anything else."""
    source = Path(path)
    if source.is_dir():
        source = source / "results.json"
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{source}: no such file") from None
    except OSError as error:
        raise ValueError(f"{source} cannot be read: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{source} is not JSON: {error}") from None
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
    return SavedResults(source, str(data.get("policy", "?")), episodes)


def _title(result: EvaluationResult) -> str:
    return f"{result.policy} on {result.dataset}/{result.split}"


def _markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
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
        f"# {_title(result)}",
        "",
        f"{result.n_episodes} episodes, seed {result.seed}, backend {result.backend}, "
        f"{timing}. Format errors: share of actions whose policy output could not be parsed.",
        "",
        "## Overall",
        "",
        _markdown_table(
            ["metric", "value"],
            [
                ["episodes", str(result.n_episodes)],
                ["success rate", f"{result.success_rate:.3f}"],
                ["mean reward", f"{result.avg_reward:.3f}"],
                ["mean steps", f"{result.avg_steps:.2f}"],
                ["format-error rate", f"{result.format_error_rate:.3f}"],
            ],
        ),
    ]
    for heading, column, groups in (
        ("By difficulty", "difficulty", result.by_difficulty),
        ("By answer type", "answer type", result.by_answer_type),
        ("By database", "database", result.by_database),
    ):
        parts += ["", f"## {heading}", "", _markdown_table([column, *group_headers], _group_rows(groups))]
    if any(g["n"] for name, g in result.by_train_overlap.items() if name == SEEN_IN_TRAIN):
        parts += [
            "",
            "## By overlap with the train split",
            "",
            "Questions whose gold SQL is also a train question's (same database, same query once "
            "case, spacing and quoting are folded) can be solved by recalling a trained query; "
            "the others show what carries over.",
            "",
            _markdown_table(["questions", *group_headers], _group_rows(result.by_train_overlap)),
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
        _markdown_table(["ending", "episodes", "share"], ended),
        "",
        "## Actions and patterns",
        "",
        _markdown_table(["action", "episodes using it", "mean per episode"], actions),
        "",
        "An action sent again is compared as the environment's repeat penalty compares it (whitespace "
        "folded, a final `;` dropped), in the transcript's text of it. Success: the share of the "
        "episodes showing the pattern that were answered correctly.",
        "",
        _markdown_table(["pattern", "episodes", "share", "success"], patterns),
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
            _markdown_table(["next step", "episodes", "success"], after),
        ]
    if not any(name in summary["patterns"] for name in TRANSCRIPT_PATTERNS):
        parts += ["", "The episodes have no transcripts: only format errors could be counted."]
    return parts


# ---- plots ------------------------------------------------------------------------------------


def _figure(width: float = 8.0, height: float = 5.0) -> Any:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    return figure


_TITLE_LINE_CHARS = 56  # what fits across a plot at the title's font size


def _wrapped_title(title: str) -> str:
    """A long title on several lines: what is plotted, then the run (a model path can be long)."""
    if len(title) <= _TITLE_LINE_CHARS:
        return title
    what, dash, run = title.partition(" — ")
    lines = (
        [what, *textwrap.wrap(run, _TITLE_LINE_CHARS)] if dash else textwrap.wrap(title, _TITLE_LINE_CHARS)
    )
    return "\n".join(lines)


def _style(axes: Any, title: str, xlabel: str, ylabel: str) -> None:
    axes.set_title(_wrapped_title(title), fontsize=15, pad=12)
    axes.set_xlabel(xlabel, fontsize=13)
    axes.set_ylabel(ylabel, fontsize=13)
    axes.tick_params(labelsize=12)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def _plot_run(result: EvaluationResult, out: Path) -> list[Path]:
    import matplotlib  # noqa: F401  (ImportError here means: no plots)

    written = []
    figure = _figure()
    axes = figure.add_subplot()
    names = list(result.by_difficulty)
    rates = [result.by_difficulty[d]["success_rate"] for d in names]
    bars = axes.bar(names, rates, color=_SUCCESS_COLOR, width=0.6)
    axes.bar_label(
        bars,
        labels=[
            f"{r:.0%}\n(n={int(result.by_difficulty[d]['n'])})" for d, r in zip(names, rates, strict=True)
        ],
        fontsize=11,
        padding=3,
    )
    axes.set_ylim(0, 1.25)
    axes.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    _style(axes, f"Success rate by difficulty — {_title(result)}", "difficulty", "success rate")
    written.append(_save(figure, out / "success_by_difficulty.png"))

    figure = _figure()
    axes = figure.add_subplot()
    wins = [e.total_reward for e in result.episodes if e.success]
    losses = [e.total_reward for e in result.episodes if not e.success]
    rewards = wins + losses
    low, high = (min(rewards), max(rewards)) if rewards else (0.0, 1.0)
    if high - low < 0.05:
        low, high = low - 0.05, high + 0.05
    axes.hist(
        [losses, wins],
        bins=30,
        range=(low, high),
        stacked=True,
        color=[_FAILURE_COLOR, _SUCCESS_COLOR],
        label=[f"not solved ({len(losses)})", f"solved ({len(wins)})"],
        edgecolor="white",
        linewidth=0.5,
    )
    axes.axvline(
        result.avg_reward,
        color=_REWARD_COLOR,
        linestyle="--",
        linewidth=1.5,
        label=f"mean {result.avg_reward:.3f}",
    )
    axes.legend(fontsize=11, frameon=False, loc="best")
    _style(axes, f"Episode reward — {_title(result)}", "total episode reward", "episodes")
    written.append(_save(figure, out / "reward_distribution.png"))

    figure = _figure()
    axes = figure.add_subplot()
    most = max((e.steps for e in result.episodes), default=1)
    edges = [s - 0.5 for s in range(1, most + 2)]
    axes.hist(
        [
            [e.steps for e in result.episodes if not e.success],
            [e.steps for e in result.episodes if e.success],
        ],
        bins=edges,
        stacked=True,
        color=[_FAILURE_COLOR, _SUCCESS_COLOR],
        label=["not solved", "solved"],
        edgecolor="white",
        linewidth=0.5,
    )
    axes.set_xticks(range(1, most + 1))
    axes.axvline(
        result.avg_steps,
        color=_REWARD_COLOR,
        linestyle="--",
        linewidth=1.5,
        label=f"mean {result.avg_steps:.2f}",
    )
    axes.legend(fontsize=11, frameon=False, loc="best")
    _style(axes, f"Steps per episode — {_title(result)}", "steps", "episodes")
    written.append(_save(figure, out / "steps_histogram.png"))
    return written


def _save(figure: Any, path: Path) -> Path:
    figure.savefig(path, format="png", facecolor="white")
    return path


# ---- transcripts ------------------------------------------------------------------------------

_PAGE_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1100px;
padding:1rem 1.5rem;color:#1d2a30;background:#fafafa}
h1{font-size:1.5rem;margin:.2rem 0}.meta{color:#555;margin-bottom:.8rem}.patterns{color:#9a3412;margin:.2rem 0}
.bar{position:sticky;top:0;background:#fafafa;padding:.5rem 0;border-bottom:1px solid #ddd;z-index:1}
.bar button{font:inherit;padding:.25rem .8rem;margin-right:.3rem;border:1px solid #999;border-radius:4px;
background:#fff;cursor:pointer}.bar button.on{background:#264653;color:#fff;border-color:#264653}
.bar input{font:inherit;padding:.25rem .5rem;width:18rem;margin-left:.5rem}
details{background:#fff;border:1px solid #ddd;border-left:6px solid #e76f51;border-radius:4px;margin:.5rem 0;
padding:.3rem .8rem}details.ok{border-left-color:#2a9d8f}summary{cursor:pointer}
summary .tag{display:inline-block;min-width:4.5rem;font-weight:600}.ok summary .tag{color:#1f7a6f}
.fail summary .tag{color:#b5482b}.q{font-weight:600;margin:.5rem 0}
table{border-collapse:collapse;width:100%;margin:.4rem 0}
th,td{border-top:1px solid #eee;padding:.3rem .4rem;vertical-align:top;text-align:left}
td.n,td.r{white-space:nowrap;text-align:right;width:3.5rem}
pre{margin:0;white-space:pre-wrap;word-break:break-word;font:13px/1.35 ui-monospace,Menlo,Consolas,monospace}
.err{color:#b5482b}.verdict{margin:.4rem 0 .3rem}
"""

_PAGE_SCRIPT = """
(function(){
  var mode='all', text='';
  var items=document.querySelectorAll('details.episode');
  function apply(){
    var shown=0;
    items.forEach(function(d){
      var ok=d.dataset.success==='1';
      var visible=(mode==='all'||(mode==='ok')===ok)&&(!text||d.textContent.toLowerCase().indexOf(text)>=0);
      d.style.display=visible?'':'none'; if(visible){shown++;}
    });
    document.getElementById('shown').textContent=shown+' of '+items.length+' shown';
  }
  document.querySelectorAll('.bar button').forEach(function(b){
    b.addEventListener('click',function(){
      mode=b.dataset.mode;
      document.querySelectorAll('.bar button').forEach(function(x){x.classList.toggle('on',x===b);});
      apply();
    });
  });
  document.getElementById('search').addEventListener('input',function(e){text=e.target.value.toLowerCase();apply();});
  apply();
})();
"""


def _episode_html(index: int, episode: EpisodeRecord) -> str:
    e = html.escape
    ok = episode.success
    rows = []
    for n, step in enumerate(episode.transcript, start=1):
        shown = f'<pre class="err">{e(step.error)}</pre>' if step.error else ""
        if step.result:
            shown += f"<pre>{e(step.result)}</pre>"
        rows.append(
            f'<tr><td class="n">{n}</td><td><pre>{e(step.action)}</pre></td><td>{shown}</td>'
            f'<td class="r">{step.reward:+.3f}</td></tr>'
        )
    if not rows:  # transcripts were not recorded: the actions at least
        rows = [
            f'<tr><td class="n">{n}</td><td><pre>{e(a)}</pre></td><td></td><td class="r"></td></tr>'
            for n, a in enumerate(episode.actions, start=1)
        ]
    format_note = f", {episode.format_errors} format errors" if episode.format_errors else ""
    seen_note = " · gold SQL seen in train" if episode.seen_in_train else ""
    shows = episode_pattern(episode).patterns
    found = [name for name in PATTERNS if name in shows]  # names the text filter can find
    patterns = f'<div class="patterns">{e(" · ".join(found))}</div>' if found else ""
    return (
        f'<details class="episode {"ok" if ok else "fail"}" data-success="{int(ok)}" id="ep-{index}">'
        f'<summary><span class="tag">{"solved" if ok else "failed"}</span> '
        f"{e(episode.question_id)} · {e(episode.db_id)} · {e(episode.difficulty)} · "
        f"{e(episode.answer_type)}{seen_note} · reward {episode.total_reward:.3f} · {episode.steps} steps"
        f"{format_note}"
        f" — {e(_short(episode.question, 90))}</summary>"
        f'<div class="q">{e(episode.question)}</div>'
        f"{patterns}"
        "<table><thead><tr><th>#</th><th>action</th><th>result</th><th>reward</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        f'<div class="verdict">Verdict: <b>{e(episode.verdict or ("correct" if ok else "wrong"))}</b>; '
        f"total reward {episode.total_reward:.3f}</div></details>"
    )


def _code_span(text: str) -> str:
    """Inline code that survives backticks in the text (a longer fence than any run inside)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def episode_markdown(episode: EpisodeRecord) -> str:
    """One episode as markdown: the question, each action with what came back and its reward,
    and the verdict (training transcripts, docs/results.md)."""
    lines = [
        f"**{episode.question_id}** ({episode.db_id}, {episode.difficulty}): {episode.question}",
        "",
    ]
    for n, step in enumerate(episode.transcript, start=1):
        lines.append(
            f"{n}. {_code_span(_short(' '.join(step.action.split()), 300))} → reward {step.reward:+.3f}"
        )
        shown = f"error: {step.error}" if step.error else step.result
        if shown:
            lines += ["", "   ```", *("   " + line for line in _short(shown, 600).splitlines()), "   ```"]
    lines += [
        "",
        f"Verdict: **{episode.verdict or ('correct' if episode.success else 'wrong')}**; "
        f"total reward {episode.total_reward:.3f}; {episode.steps} steps; "
        f"{episode.format_errors} format errors.",
        "",
    ]
    return "\n".join(lines)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def transcripts_html(result: EvaluationResult) -> str:
    """One self-contained page with every episode; all dataset and model text is escaped."""
    e = html.escape
    solved = sum(ep.success for ep in result.episodes)
    episodes = "\n".join(_episode_html(i, ep) for i, ep in enumerate(result.episodes))
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(_title(result))} — transcripts</title><style>{_PAGE_STYLE}</style></head><body>"
        f"<h1>{e(_title(result))}</h1>"
        f'<div class="meta">{result.n_episodes} episodes · {solved} solved · success rate '
        f"{result.success_rate:.3f} · mean reward {result.avg_reward:.3f} · mean steps "
        f"{result.avg_steps:.2f} · seed {result.seed}</div>"
        '<div class="bar"><button class="on" data-mode="all">all</button>'
        '<button data-mode="ok">solved</button><button data-mode="fail">failed</button>'
        '<input id="search" type="search" placeholder="filter by text (question, SQL, id…)"> '
        '<span id="shown"></span></div>'
        f"{episodes}<script>{_PAGE_SCRIPT}</script></body></html>\n"
    )


# ---- several policies -------------------------------------------------------------------------


def comparison_json(results: Sequence[EvaluationResult]) -> dict[str, Any]:
    """Per-policy summaries and, per episode, each policy's outcome side by side."""
    first = results[0]
    order = [e.question_id for e in first.episodes]
    for r in results[1:]:
        if [e.question_id for e in r.episodes] != order:
            raise ValueError(
                f"{r.policy} played other questions than {first.policy}: use the same seed and episodes"
            )
    per_episode = []
    for i, episode in enumerate(first.episodes):
        row: dict[str, Any] = {
            "question_id": episode.question_id,
            "db_id": episode.db_id,
            "difficulty": episode.difficulty,
            "answer_type": episode.answer_type,
            "seen_in_train": episode.seen_in_train,
        }
        for r in results:
            other = r.episodes[i]
            row[r.policy] = {
                "success": other.success,
                "total_reward": other.total_reward,
                "steps": other.steps,
                "format_errors": other.format_errors,
            }
        per_episode.append(row)
    return {
        "dataset": first.dataset,
        "split": first.split,
        "seed": first.seed,
        "n_episodes": first.n_episodes,
        "policies": {r.policy: r.to_json(include_episodes=False) for r in results},
        "per_episode": per_episode,
    }


def write_comparison(results: Sequence[EvaluationResult], directory: str | Path) -> ReportFiles:
    """compare.json and compare.png (success rate and mean reward per policy) in `directory`."""
    if not results:
        raise ValueError("nothing to compare: no results")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(out)
    path = out / "compare.json"
    path.write_text(
        json.dumps(comparison_json(results), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    files.written.append(path)
    try:
        files.written.append(_plot_comparison(results, out / "compare.png"))
    except ImportError:
        files.skipped.append("compare.png (matplotlib missing: pip install 'sqlenv[eval]')")
    return files


def _plot_comparison(results: Sequence[EvaluationResult], path: Path) -> Path:
    import matplotlib  # noqa: F401

    first = results[0]
    names = [r.policy for r in results]
    figure = _figure(width=max(8.0, 1.6 * len(results) + 4), height=5.0)
    left, right = figure.subplots(1, 2)
    bars = left.bar(names, [r.success_rate for r in results], color=_SUCCESS_COLOR, width=0.6)
    left.bar_label(bars, labels=[f"{r.success_rate:.0%}" for r in results], fontsize=11, padding=3)
    left.set_ylim(0, 1.15)
    left.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    _style(left, "Success rate", "policy", "success rate")
    rewards = [r.avg_reward for r in results]
    bars = right.bar(names, rewards, color=_REWARD_COLOR, width=0.6)
    right.bar_label(bars, labels=[f"{v:.3f}" for v in rewards], fontsize=11, padding=3)
    top = max([*rewards, 0.0])
    bottom = min([*rewards, 0.0])
    right.set_ylim(bottom * 1.2, max(top * 1.2, 0.1))
    right.axhline(0, color="#888", linewidth=0.8)
    _style(right, "Mean episode reward", "policy", "reward")
    for axes in (left, right):
        if len(names) > 3 or max(len(n) for n in names) > 12:
            axes.tick_params(axis="x", labelrotation=20)
    figure.suptitle(
        f"{first.dataset}/{first.split}: {first.n_episodes} episodes per policy, seed {first.seed}",
        fontsize=15,
    )
    return _save(figure, path)
