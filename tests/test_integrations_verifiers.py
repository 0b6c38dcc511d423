"""sqlenv through verifiers' own rollout machinery (`load_environment`, `Environment.evaluate`
with its OpenAI chat-completions client, the rubric, and the `vf-eval` command).

Only the model is stood in for: `ScriptedModel` is an OpenAI-compatible HTTP endpoint that answers
each request with the next reply of its question's script (a tool call, a call written as JSON in
the text, or a reply that is no call). Oracle, random and malformed episodes then earn, in their
reward and its parts, what sqlenv's environment gives the same replies in process, and what
`sqlenv eval` (its `OpenAIPolicy`) scores against the same endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from integration_episodes import (
    MALFORMED,
    Reference,
    Reply,
    call_json,
    oracle_replies,
    random_replies,
    reference,
    require_stack,
)

require_stack("verifiers", "verifiers")

import verifiers as vf  # noqa: E402
from verifiers.types import ClientConfig  # noqa: E402

from sqlenv.agents.prompts import FORMAT_ERROR_MESSAGE, question_message, system_message  # noqa: E402
from sqlenv.agents.tools import action_to_tool_call  # noqa: E402
from sqlenv.config import EnvConfig  # noqa: E402
from sqlenv.env.environment import SQLEnvironment  # noqa: E402
from sqlenv.env.models import SQLAction  # noqa: E402
from sqlenv.integrations.verifiers_env import ENV_ID, NOT_RUN, SQLEnvVerifiers, load_environment  # noqa: E402

PARTS = ("correctness", "progress", "operational")
# A call with a wrong argument name, as sqlenv's OpenAIPolicy writes it into the invalid action.
BAD_CALL = 'describe({"table": "loans"})'


class ScriptedModel:
    """An OpenAI-compatible chat-completions endpoint standing in for the model (module docstring).

    A script is keyed by its question message's text, and replies in order to that question's
    requests (`script` starts it again). A call is sent as `tool_calls`, or with `as_text` as JSON
    in a code fence; `extra_call_at` adds a second call to that turn's reply."""

    def __init__(self) -> None:
        self.scripts: dict[str, tuple[list[Reply], bool, int | None]] = {}
        self.turns: dict[str, int] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real server: the client pools connections

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(body)
                data = json.dumps(model.reply(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def script(
        self, question: str, replies: Sequence[Reply], as_text: bool = False, extra_call_at: int | None = None
    ) -> None:
        with self.lock:
            self.scripts[question] = (list(replies), as_text, extra_call_at)
            self.turns[question] = 0

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        question = next(m["content"] for m in body["messages"] if m["role"] == "user")
        with self.lock:
            replies, as_text, extra_call_at = self.scripts[question]
            turn = self.turns[question]
            self.turns[question] += 1
        reply = replies[turn]
        if reply == BAD_CALL:
            bad = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "describe", "arguments": '{"table": "loans"}'},
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [bad]}
        elif isinstance(reply, str):
            message = {"role": "assistant", "content": reply}
        elif as_text:
            message = {"role": "assistant", "content": f"```json\n{call_json(reply)}\n```"}
        else:
            calls = [reply] + (
                [SQLAction(action_type="SAMPLE", argument="x")] if turn == extra_call_at else []
            )
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [_wire_call(a, f"call_{turn}_{i}") for i, a in enumerate(calls)],
            }
        return {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # every rollout of a run connects at once (the default backlog is 5)


def _wire_call(action: SQLAction, call_id: str) -> dict[str, Any]:
    function = action_to_tool_call(action)["function"]
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": function["name"], "arguments": json.dumps(function["arguments"])},
    }


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    stub = ScriptedModel()
    thread = threading.Thread(target=stub.server.serve_forever, daemon=True)
    thread.start()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def question_text(dataset, question_id: str, config: EnvConfig) -> str:
    env = SQLEnvironment(dataset=dataset, split=dataset.get(question_id).split, config=config)
    return question_message(env.reset(question_id=question_id))["content"]


def rollouts(model: ScriptedModel, env: SQLEnvVerifiers) -> dict[str, dict[str, Any]]:
    """Every question of the environment's evaluation rows played once through verifiers."""
    client = ClientConfig(api_key_var="SQLENV_STUB_KEY", api_base_url=model.url, max_retries=0)
    results = env.evaluate_sync(client, "scripted", num_examples=-1, rollouts_per_example=1)
    return {output["info"]["question_id"]: output for output in results["outputs"]}


def assert_same_rewards(output: dict[str, Any], ref: Reference) -> None:
    assert output["error"] is None, output["error"]
    assert output["stop_condition"] == "has_final_env_response"
    assert output["reward"] == pytest.approx(ref.total, abs=1e-9)
    metrics = output["metrics"]
    assert {p: metrics[p] for p in PARTS} == pytest.approx(ref.parts, abs=1e-12)
    assert metrics["correct"] == float(ref.correct) and metrics["answered"] == float(ref.answered)
    assert metrics["steps"] == ref.steps == metrics["num_turns"]
    assert metrics["format_errors"] == ref.format_errors


def test_load_environment_is_what_verifiers_and_vf_eval_load(demo_dataset) -> None:
    env = vf.load_environment(ENV_ID, split=None, eval_split="eval")  # how vf-eval resolves the id
    assert isinstance(env, SQLEnvVerifiers) and isinstance(env, vf.MultiTurnEnv)
    assert [t.name for t in env.tool_defs] == ["describe", "sample", "query", "answer"]
    assert env.max_turns == 15
    rows = env.get_eval_dataset()
    assert len(rows) == 28
    record = demo_dataset.split("eval")[0]
    observation = SQLEnvironment(dataset=demo_dataset, split="eval").reset(question_id=record.question_id)
    assert rows[0]["info"]["question_id"] == record.question_id
    assert rows[0]["prompt"] == [system_message(observation), question_message(observation)]  # schema hidden
    assert "CREATE TABLE" not in rows[0]["prompt"][1]["content"]


@pytest.mark.parametrize("answer_mode", ["value", "sql"])
def test_oracle_rollouts_earn_sqlenvs_rewards(model: ScriptedModel, demo_dataset, answer_mode: str) -> None:
    config = EnvConfig(answer_mode=answer_mode)
    refs = {}
    for record in demo_dataset.split("eval"):
        replies = oracle_replies(demo_dataset, record.question_id, config)
        refs[record.question_id] = reference(demo_dataset, record.question_id, replies, config)
        model.script(question_text(demo_dataset, record.question_id, config), replies)
    outputs = rollouts(model, load_environment(split=None, eval_split="eval", answer_mode=answer_mode))
    assert outputs.keys() == refs.keys()
    for question_id, ref in refs.items():
        assert_same_rewards(outputs[question_id], ref)
        assert ref.correct
    sent = model.requests[-1]
    assert [t["function"]["name"] for t in sent["tools"]] == ["describe", "sample", "query", "answer"]
    assert ("SELECT statement" in sent["tools"][3]["function"]["description"]) is (answer_mode == "sql")


def test_random_rollouts_earn_sqlenvs_rewards(model: ScriptedModel, demo_dataset) -> None:
    config = EnvConfig()
    questions = [r.question_id for r in demo_dataset.split("train")[::5][:12]]
    refs = {}
    for seed, question_id in enumerate(questions):
        replies = random_replies(demo_dataset, question_id, seed, config)
        refs[question_id] = reference(demo_dataset, question_id, replies, config)
        # Half of them write their calls as JSON in the text, as untrained models often do.
        model.script(question_text(demo_dataset, question_id, config), replies, as_text=bool(seed % 2))
    outputs = rollouts(model, load_environment(split="train", eval_split=None, question_ids=questions))
    assert outputs.keys() == refs.keys()
    for question_id, ref in refs.items():
        assert_same_rewards(outputs[question_id], ref)


def test_malformed_replies_and_extra_calls_are_played_as_sqlenv_plays_them(
    model: ScriptedModel, demo_dataset
) -> None:
    """A reply that is no call, or a call with a wrong argument, is a format error: a step spent
    (the same one twice is a repeat) and the model told; a second call in one reply is not run,
    and the model is told that."""
    config = EnvConfig()
    never, bad_start = demo_dataset.split("eval")[1].question_id, demo_dataset.split("eval")[2].question_id
    replies_never: list[Reply] = [f"{MALFORMED} ({i})" for i in range(config.step_budget)]
    replies_bad = [MALFORMED, MALFORMED, BAD_CALL, *oracle_replies(demo_dataset, bad_start, config)]
    model.script(question_text(demo_dataset, never, config), replies_never)
    model.script(question_text(demo_dataset, bad_start, config), replies_bad, extra_call_at=3)
    outputs = rollouts(model, load_environment(split=None, question_ids=[never, bad_start]))
    assert_same_rewards(outputs[never], reference(demo_dataset, never, replies_never, config))
    assert_same_rewards(outputs[bad_start], reference(demo_dataset, bad_start, replies_bad, config))
    completion = outputs[bad_start]["completion"]
    feedback = FORMAT_ERROR_MESSAGE.format(problem="no tool call found")
    assert (
        completion[1] == {"role": "user", "content": feedback}
        or getattr(completion[1], "content", None) == feedback
    )
    bad = FORMAT_ERROR_MESSAGE.format(problem="describe needs the argument 'table_name' (got table)")
    assert _get(completion[5], "role") == "tool" and _get(completion[5], "content") == bad
    extra = [m for m in completion if _get(m, "role") == "tool" and _get(m, "content") == NOT_RUN]
    assert len(extra) == 1
    assert outputs[bad_start]["metrics"]["format_errors"] == 3
    assert outputs[never]["metrics"]["answered"] == 0.0 and outputs[never]["metrics"]["steps"] == 15


def _get(message: Any, key: str) -> Any:
    return message.get(key) if isinstance(message, dict) else getattr(message, key, None)


def test_reward_weights_weigh_the_parts(model: ScriptedModel, demo_dataset) -> None:
    config = EnvConfig()
    question_id = demo_dataset.split("eval")[4].question_id
    replies = [MALFORMED, *oracle_replies(demo_dataset, question_id, config)]
    ref = reference(demo_dataset, question_id, replies, config)
    model.script(question_text(demo_dataset, question_id, config), replies)
    env = load_environment(
        split=None, question_ids=[question_id], reward_weights={"correctness": 2.0, "progress": 0.5}
    )
    (output,) = rollouts(model, env).values()
    expected = 2.0 * ref.parts["correctness"] + 0.5 * ref.parts["progress"] + ref.parts["operational"]
    assert output["reward"] == pytest.approx(expected, abs=1e-9)


def test_results_agree_with_sqlenv_eval_on_the_same_questions_and_model(
    model: ScriptedModel, demo_dataset
) -> None:
    """`sqlenv eval` with an OpenAI-compatible model (OpenAIPolicy) and verifiers with the same
    model: the same replies, so the same success and total reward on every question."""
    from sqlenv.agents.openai_policy import OpenAIPolicy
    from sqlenv.evaluation import evaluate

    config = EnvConfig()
    questions = [r.question_id for r in demo_dataset.split("eval")[5:15]]
    scripts = {}
    for i, question_id in enumerate(questions):
        replies = (
            oracle_replies(demo_dataset, question_id, config)
            if i % 2
            else random_replies(demo_dataset, question_id, i, config)
        )
        scripts[question_text(demo_dataset, question_id, config)] = (
            [MALFORMED, *replies][i % 3 != 0 :],
            i % 4 == 1,
        )

    def start_scripts() -> None:
        for question, (replies, as_text) in scripts.items():
            model.script(question, replies, as_text=as_text)

    start_scripts()
    local = evaluate(
        SQLEnvironment(dataset=demo_dataset, split="eval"),
        OpenAIPolicy(model.url, "scripted", max_new_tokens=64),
        question_ids=questions,
    )
    start_scripts()
    outputs = rollouts(model, load_environment(split=None, question_ids=questions))
    assert [e.question_id for e in local.episodes] == questions
    for episode in local.episodes:
        output = outputs[episode.question_id]
        assert output["metrics"]["correct"] == float(episode.success)
        assert output["reward"] == pytest.approx(episode.total_reward, abs=1e-6)
        assert output["metrics"]["format_errors"] == episode.format_errors
        assert output["metrics"]["steps"] == episode.steps
    assert {e.success for e in local.episodes} == {True, False}  # both outcomes are compared


def test_vf_eval_runs_the_environment(model: ScriptedModel, demo_dataset, tmp_path: Path) -> None:
    """The command a user runs: `vf-eval` finds the environment by its module, plays it against
    the endpoint (in its env-server worker process) and saves the results."""
    config = EnvConfig()
    questions = [r.question_id for r in demo_dataset.split("eval")[:3]]
    refs = {}
    for question_id in questions:
        replies = oracle_replies(demo_dataset, question_id, config)
        refs[question_id] = reference(demo_dataset, question_id, replies, config)
        model.script(question_text(demo_dataset, question_id, config), replies)
    vf_eval = Path(sys.executable).parent / "vf-eval"
    args = {"split": None, "eval_split": "eval", "question_ids": questions}
    command = [
        str(vf_eval), ENV_ID, "-a", json.dumps(args), "-m", "scripted", "-b", model.url, "-k", "SQLENV_STUB_KEY",
        "-n", "3", "-r", "1", "-d", "-s", "-o", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=240, env={**os.environ, "SQLENV_STUB_KEY": "x"}
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (results,) = tmp_path.rglob("results.jsonl")
    outputs = {o["info"]["question_id"]: o for o in map(json.loads, results.read_text().splitlines())}
    assert outputs.keys() == refs.keys()
    for question_id, ref in refs.items():
        assert outputs[question_id]["reward"] == pytest.approx(ref.total, abs=1e-9)
        assert {p: outputs[question_id][p] for p in PARTS} == pytest.approx(ref.parts, abs=1e-12)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="split and eval_split are both None"):
        load_environment(split=None, eval_split=None)
    with pytest.raises(ValueError, match="question_ids not in split 'eval' of 'demo': demo-0011"):
        load_environment(split=None, question_ids=["demo-0011"])
    with pytest.raises(ValueError, match=r"reward_weights: unknown part\(s\) \['terminal'\]"):
        load_environment(reward_weights={"terminal": 1.0})
    with pytest.raises(ValueError, match="answer_mode must be one of value, sql"):
        load_environment(answer_mode="text")
    with pytest.raises(KeyError, match="no split 'test'"):
        load_environment(eval_split="test")
    with pytest.raises(ValueError, match="step_budget must be a positive number of steps, not 0"):
        load_environment(max_turns=0)


def test_without_the_extra_the_import_names_it() -> None:
    code = (
        "import sys; sys.modules['verifiers'] = None\n"
        "try:\n    import sqlenv.integrations.verifiers_env\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MissingExtraError sqlenv.integrations.verifiers_env needs the 'verifiers' extra")
    assert "pip install -e '.[verifiers]'" in out


@pytest.mark.parametrize("answer_mode", ["value", "sql"])
def test_spider_rollouts_earn_sqlenvs_rewards(
    model: ScriptedModel, spider10, spider_dir, answer_mode: str
) -> None:
    config = EnvConfig(answer_mode=answer_mode)
    questions = [r.question_id for r in spider10.split("eval")[:4]]
    refs = {}
    for i, question_id in enumerate(questions):
        replies = (
            oracle_replies(spider10, question_id, config)
            if i % 2 == 0
            else random_replies(spider10, question_id, i, config)
        )
        refs[question_id] = reference(spider10, question_id, replies, config)
        model.script(question_text(spider10, question_id, config), replies)
    env = load_environment(
        dataset="spider10",
        split=None,
        eval_split="eval",
        spider_dir=str(spider_dir),
        answer_mode=answer_mode,
        question_ids=questions,
    )
    outputs = rollouts(model, env)
    assert outputs.keys() == refs.keys()
    for question_id, ref in refs.items():
        assert_same_rewards(outputs[question_id], ref)
