"""`transcripts.html`: one self-contained page (inline CSS and script, every text escaped) with
each episode's question, failure patterns, actions, results, rewards and verdict, filterable by
outcome and text."""

from __future__ import annotations

import html

from sqlenv.evaluation.patterns import PATTERNS, episode_pattern
from sqlenv.evaluation.records import EpisodeRecord, EvaluationResult
from sqlenv.evaluation.reports.markdown import shorten
from sqlenv.evaluation.reports.names import report_title

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
        f" — {e(shorten(episode.question, 90))}</summary>"
        f'<div class="q">{e(episode.question)}</div>'
        f"{patterns}"
        "<table><thead><tr><th>#</th><th>action</th><th>result</th><th>reward</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        f'<div class="verdict">Verdict: <b>{e(episode.verdict or ("correct" if ok else "wrong"))}</b>; '
        f"total reward {episode.total_reward:.3f}</div></details>"
    )


def transcripts_html(result: EvaluationResult) -> str:
    """One self-contained page with every episode; all dataset and model text is escaped."""
    e = html.escape
    solved = sum(ep.success for ep in result.episodes)
    episodes = "\n".join(_episode_html(i, ep) for i, ep in enumerate(result.episodes))
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(report_title(result))} — transcripts</title><style>{_PAGE_STYLE}</style></head><body>"
        f"<h1>{e(report_title(result))}</h1>"
        f'<div class="meta">{result.n_episodes} episodes · {solved} solved · {result.success_label} '
        f"{result.success_rate:.3f} · mean reward {result.avg_reward:.3f} · mean steps "
        f"{result.avg_steps:.2f} · seed {result.seed}</div>"
        '<div class="bar"><button class="on" data-mode="all">all</button>'
        '<button data-mode="ok">solved</button><button data-mode="fail">failed</button>'
        '<input id="search" type="search" placeholder="filter by text (question, SQL, id…)"> '
        '<span id="shown"></span></div>'
        f"{episodes}<script>{_PAGE_SCRIPT}</script></body></html>\n"
    )
