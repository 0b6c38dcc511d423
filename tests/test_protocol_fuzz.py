"""Hostile input against the wire protocol of a real server: more than 10,000 random and malformed
WebSocket frames, and schemathesis over every HTTP endpoint of the OpenAPI schema.

What must hold, frame by frame (the expectation is computed from the frame, never from the reply):
- a text frame that is not a valid message gets an error frame (`{"type": "error", ...}`) and the
  session stays usable with its episode intact (same question, same step count);
- a valid message with hostile content (junk SQL, unknown tables or action types, multi-megabyte
  arguments, steps before reset) gets an observation whose `error` says what is wrong;
- where OpenEnv closes the connection instead (see OPENENV_CLOSES below) the close is clean
  (code 1000 after an error frame, or 1009 for an oversized frame) and a NEW connection plays;
- meanwhile a victim session on its own connection plays oracle episodes before, during and after
  the fuzzing and gets exactly the in-process rewards; afterwards no session is left open.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import string
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

import pytest
import websockets

from conftest import RunningServer, oracle_episode_total
from sqlenv import SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.evaluation import evaluate
from sqlenv.server.client import SQLEnvClient

FUZZ_SEED = 20_250_606
FUZZ_CONNECTIONS = 8
FRAMES_PER_CONNECTION = 1_260  # 8 x 1,260 = 10,080 fuzz frames, plus the oversized ones
CHECK_EVERY = 12  # after this many fuzz frames: state intact? a reset and a step still work?
REPLY_TIMEOUT_S = 30.0
OPENENV_FRAME_LIMIT = 16 * 1024 * 1024  # uvicorn's default ws_max_size, which OpenEnv keeps
KNOWN_TYPES = ("reset", "step", "state", "close", "mcp")

# OPENENV_CLOSES — frames after which OpenEnv 0.10's /ws handler sends an error frame with code
# SESSION_ERROR and then closes the connection (code 1000), instead of answering and reading on.
# All of these happen in OpenEnv's `websocket_endpoint` outside its per-message try block, so they
# reach the connection-level `except Exception`; none is ours to fix:
# - JSON that is not an object (array, number, string, null, NaN): `message_dict.get("type")`
#   raises AttributeError;
# - nesting deeper than Python's recursion limit: `json.loads` raises RecursionError, which is
#   not the JSONDecodeError it catches (likewise an integer literal over 4,300 digits: ValueError);
# - a step whose invalid data nests 255+ levels deep: the validation error echoes its input and
#   `model_dump_json` fails with "Maximum serialization depth exceeded" inside the except clause;
# - binary frames: Starlette's `receive_text()` raises KeyError('text').
# Frames over 16 MiB are closed by uvicorn with 1009 (message too big) before OpenEnv sees them.


class Expect(Enum):
    ERROR = "error frame, session intact"
    OBSERVATION = "observation with an error, or a step spent"
    MCP_ERROR = "OpenEnv's MCP reply carrying a JSON-RPC error"
    ERROR_THEN_MAYBE_CLOSE = "error frame, then a clean close or an intact session"
    CLOSE = "a clean close, perhaps after an error frame"


@dataclass(frozen=True)
class Frame:
    kind: str
    payload: str | bytes
    expect: Expect
    spends_step: bool = False  # a valid step: the episode's step count moves
    ends_episode: bool = False  # a valid ANSWER


# ---- frame generators (deterministic: everything comes from the rng passed in) ------------------


def _junk_text(rng: random.Random, max_len: int = 40) -> str:
    alphabet = string.printable + "é€😀\u0000\u202e\ufeff'\"\\{}[]:,"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len)))


def _junk_key(rng: random.Random) -> str:
    return "k_" + "".join(rng.choice(string.ascii_letters + "_-.$") for _ in range(rng.randint(1, 12)))


def _junk_value(rng: random.Random, depth: int) -> object:
    if depth <= 0:
        return rng.choice(
            [
                None,
                True,
                False,
                rng.randint(-(2**70), 2**70),
                rng.uniform(-1e300, 1e300),
                _junk_text(rng),
                "",
            ]
        )
    if rng.random() < 0.5:
        return [_junk_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    return {_junk_key(rng): _junk_value(rng, depth - 1) for _ in range(rng.randint(0, 4))}


def _nested(depth: int, rng: random.Random) -> str:
    """A JSON text nested `depth` levels deep (objects and arrays mixed)."""
    opens, closes = [], []
    for _ in range(depth):
        if rng.random() < 0.5:
            opens.append("[")
            closes.append("]")
        else:
            opens.append('{"d":')
            closes.append("}")
    return "".join(opens) + "0" + "".join(reversed(closes))


def _valid_message(rng: random.Random) -> dict:
    return rng.choice(
        [
            {"type": "reset", "data": {"seed": rng.randint(0, 99)}},
            {"type": "step", "data": {"action_type": "QUERY", "argument": "SELECT 1"}},
            {"type": "step", "data": {"action_type": "DESCRIBE", "argument": "t"}},
            {"type": "state"},
        ]
    )


def _classify_text(text: str) -> Expect | None:
    """What OpenEnv does with a text frame that is not a JSON object, judged with the same parser
    the server uses; None for a JSON object (its expectation depends on its content)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return Expect.ERROR
    except (ValueError, RecursionError):
        return Expect.ERROR_THEN_MAYBE_CLOSE
    return None if isinstance(value, dict) else Expect.ERROR_THEN_MAYBE_CLOSE


def _text_frame(kind: str, text: str, fallback: Expect = Expect.ERROR) -> Frame:
    return Frame(kind, text, _classify_text(text) or fallback)


def random_bytes_frame(rng: random.Random) -> Frame:
    raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    text = raw.decode("utf-8", errors=rng.choice(["replace", "ignore", "backslashreplace"]))
    return _text_frame("random bytes", text)


def truncated_json_frame(rng: random.Random) -> Frame:
    text = json.dumps(_valid_message(rng))
    return _text_frame("truncated JSON", text[: rng.randint(0, len(text) - 1)])


def mutated_json_frame(rng: random.Random) -> Frame:
    chars = list(json.dumps(_valid_message(rng)))
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(chars))
        op = rng.randrange(3)
        if op == 0:
            del chars[i]
        elif op == 1:
            chars.insert(i, rng.choice('{}[]",:\\ x0'))
        else:
            chars[i] = rng.choice('{}[]",:\\ x0')
    text = "".join(chars)
    expect = _classify_text(text)
    if expect is None:  # still an object: may even be valid; no fixed expectation, make another
        return truncated_json_frame(rng)
    return Frame("invalid JSON", text, expect)


def wrong_shape_frame(rng: random.Random) -> Frame:
    value = rng.choice(
        [
            lambda: json.dumps([_valid_message(rng)]),
            lambda: json.dumps(_junk_value(rng, 2) if rng.random() < 0.5 else []),
            lambda: str(rng.randint(-(10**20), 10**20)),
            lambda: repr(rng.uniform(-1e9, 1e9)),
            lambda: json.dumps(_junk_text(rng)),
            lambda: rng.choice(["null", "true", "false", "NaN", "-Infinity", '"reset"', "[]", "0"]),
        ]
    )()
    return _text_frame("JSON of the wrong shape", value, Expect.ERROR)


def unknown_type_frame(rng: random.Random) -> Frame:
    msg_type = rng.choice(
        [
            lambda: _junk_text(rng, 20),
            lambda: rng.choice(KNOWN_TYPES).upper(),
            lambda: rng.choice(KNOWN_TYPES) + rng.choice([" ", "\n", "_", "s"]),
            lambda: rng.randint(-5, 5),
            lambda: None,
            lambda: [rng.choice(KNOWN_TYPES)],
            lambda: {"type": rng.choice(KNOWN_TYPES)},
            lambda: rng.random() < 0.5,
        ]
    )()
    if msg_type in KNOWN_TYPES:
        msg_type = "not-" + str(msg_type)
    message: dict = {"type": msg_type} if rng.random() < 0.9 else {}  # no "type" at all: ""
    if rng.random() < 0.5:
        message["data"] = _junk_value(rng, rng.randint(0, 3))
    return Frame("unknown type", json.dumps(message), Expect.ERROR)


def wrong_data_frame(rng: random.Random) -> Frame:
    """A known type whose data can never be valid."""
    choice = rng.randrange(7)
    if choice == 0:  # reset: any unknown argument is refused (data, when a dict, has one)
        data = {_junk_key(rng): _junk_value(rng, 2)}
        for key in ("seed", "question_id", "episode_id"):
            if rng.random() < 0.3:
                data[key] = _junk_value(rng, 1)
        message: dict = {"type": "reset", "data": data}
    elif choice == 1:  # reset with data that is not an object
        message = {"type": "reset", "data": rng.choice([[], [1], "x", 3, True])}
    elif choice == 2:  # step without action_type
        message = {"type": "step", "data": {"argument": _junk_text(rng)}}
    elif choice == 3:  # step with an extra field (actions forbid extras) or a non-string type
        data = {"action_type": rng.choice(["QUERY", 7, None, ["QUERY"], {"a": 1}]), "argument": "SELECT 1"}
        if isinstance(data["action_type"], str):
            data[_junk_key(rng)] = _junk_value(rng, rng.randint(0, 3))
        message = {"type": "step", "data": data}
    elif choice == 4:  # step with data that is not an object, or no data at all
        message = {"type": "step", "data": rng.choice([[], "QUERY", 1, None])}
        if rng.random() < 0.3:
            del message["data"]
    elif choice == 5:  # OpenEnv's MCP tool actions dressed as a step: not SQLActions
        message = {"type": "step", "data": {"type": rng.choice(["list_tools", "call_tool"])}}
        if rng.random() < 0.5:
            message["data"][_junk_key(rng)] = _junk_value(rng, 1)
    else:  # state/close with fields they do not have (a close with junk must NOT close)
        message = {"type": rng.choice(["state", "close"]), _junk_key(rng): _junk_value(rng, 1)}
    return Frame("known type, wrong data", json.dumps(message), Expect.ERROR)


def deep_nesting_frame(rng: random.Random) -> Frame:
    if rng.random() < 0.6:  # shallow enough for OpenEnv to answer and carry on
        depth = rng.randint(20, 120)
        where = rng.choice(["step_extra", "unknown_type", "reset_arg"])
        expect = Expect.ERROR
    else:  # past the serializer's or the parser's depth limit: OpenEnv closes (OPENENV_CLOSES)
        depth = rng.choice([rng.randint(256, 900), rng.randint(1_100, 20_000)])
        where = rng.choice(["step_extra", "top"])
        expect = Expect.ERROR_THEN_MAYBE_CLOSE
    inner = _nested(depth, rng)
    text = {
        "step_extra": '{"type":"step","data":{"action_type":"QUERY","argument":"SELECT 1","k_x":%s}}',
        "unknown_type": '{"type":"nested","data":%s}',
        "reset_arg": '{"type":"reset","data":{"k_deep":%s}}',
        "top": "%s",
    }[where] % inner
    return Frame(f"deep nesting ({'shallow' if expect is Expect.ERROR else 'too deep'})", text, expect)


def huge_string_frame(rng: random.Random) -> Frame:
    size = rng.choice([100_000, 1_000_000, 4_000_000])
    big = rng.choice(string.ascii_letters) * size
    choice = rng.randrange(4)
    if choice == 0:
        return Frame("huge string", json.dumps({"type": big}), Expect.ERROR)
    if choice == 1:
        return Frame("huge string", json.dumps({"type": "step", "data": {"k_big": big}}), Expect.ERROR)
    if choice == 2:
        return Frame("huge string", json.dumps({"type": "reset", "data": {"question_id": big}}), Expect.ERROR)
    action = {"action_type": rng.choice(["QUERY", "DESCRIBE", "SAMPLE"]), "argument": big}
    return Frame(
        "huge string (valid step)",
        json.dumps({"type": "step", "data": action}),
        Expect.OBSERVATION,
        spends_step=True,
    )


def huge_number_frame(rng: random.Random) -> Frame:
    digits = "9" * rng.randint(4_400, 20_000)  # over CPython's int-from-text limit of 4,300 digits
    return Frame(
        "huge integer literal",
        '{"type":"reset","data":{"seed":' + digits + "}}",
        Expect.ERROR_THEN_MAYBE_CLOSE,
    )


def hostile_valid_step_frame(rng: random.Random) -> Frame:
    """A valid message the environment must answer with an observation, not a crash."""
    kind = rng.choice(["QUERY", "query", "DESCRIBE", "SAMPLE", "EXPLODE", "", " answer ", "ANSWER"])
    argument = rng.choice(
        [
            lambda: _junk_text(rng, 200),
            lambda: "SELECT " + _junk_text(rng, 30),
            lambda: rng.choice(["DROP TABLE x", "ATTACH 'x' AS y", "PRAGMA writable_schema=1", "; ;"]),
            lambda: '"' + _junk_text(rng, 10) + '"',
            lambda: "",
        ]
    )()
    action: dict = {"action_type": kind, "argument": argument}
    if rng.random() < 0.2:
        action["metadata"] = _junk_value(rng, 2) if rng.random() < 0.5 else {}
        if not isinstance(action["metadata"], dict):
            action["metadata"] = {"m": action["metadata"]}
    is_answer = kind.strip().upper() == "ANSWER"
    return Frame(
        "valid step, hostile content",
        json.dumps({"type": "step", "data": action}),
        Expect.OBSERVATION,
        spends_step=True,
        ends_episode=is_answer,
    )


def mcp_junk_frame(rng: random.Random) -> Frame:
    data = rng.choice(
        [
            lambda: _junk_value(rng, 2) if rng.random() < 0.5 else {},
            lambda: {"jsonrpc": "2.0", "id": rng.randint(0, 9), "method": _junk_text(rng, 15)},
            lambda: {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "DROP"}},
        ]
    )()
    message = {"type": "mcp", "data": data if isinstance(data, dict) else {"x": data}}
    return Frame("mcp junk", json.dumps(message), Expect.MCP_ERROR)


def binary_frame(rng: random.Random) -> Frame:
    payload = rng.choice(
        [
            lambda: bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))),
            lambda: json.dumps(_valid_message(rng)).encode(),
        ]
    )()
    return Frame("binary frame", payload, Expect.CLOSE)


GENERATORS = [  # (weight, generator)
    (14, random_bytes_frame),
    (12, truncated_json_frame),
    (12, mutated_json_frame),
    (6, wrong_shape_frame),
    (14, unknown_type_frame),
    (18, wrong_data_frame),
    (5, deep_nesting_frame),
    (1, huge_string_frame),
    (1, huge_number_frame),
    (12, hostile_valid_step_frame),
    (4, mcp_junk_frame),
    (1, binary_frame),
]


def fuzz_frames(rng: random.Random, n: int) -> Iterator[Frame]:
    weights = [w for w, _ in GENERATORS]
    makers = [g for _, g in GENERATORS]
    for _ in range(n):
        yield rng.choices(makers, weights)[0](rng)


# ---- the live server ---------------------------------------------------------------------------


def _drain_output(server: RunningServer) -> collections.deque[str]:
    """Read the server's piped output on a thread so a chatty server can never block on it."""
    tail: collections.deque[str] = collections.deque(maxlen=200)

    def pump() -> None:
        for line in server.process.stdout:
            tail.append(line)

    threading.Thread(target=pump, daemon=True).start()
    return tail


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[RunningServer]:
    server = RunningServer("--dataset", "demo", "--split", "train", "--max-sessions", "64")
    server.output_tail = _drain_output(server)  # type: ignore[attr-defined]
    yield server
    server.stop()


async def _recv_json(ws) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), REPLY_TIMEOUT_S))


async def _exchange(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return await _recv_json(ws)


class FuzzedSession:
    """One fuzzing connection: sends frames, checks each reply against the frame's expectation,
    keeps track of the episode the server should hold, reconnects after a (clean) close."""

    def __init__(self, url: str, rng: random.Random, question_ids: list[str], stats: collections.Counter):
        self.url = url
        self.rng = rng
        self.question_ids = question_ids
        self.stats = stats
        self.ws = None
        self.question_id = ""
        self.steps = 0
        self.done = False

    async def open(self) -> None:
        self.ws = await websockets.connect(self.url, max_size=None, open_timeout=REPLY_TIMEOUT_S)
        # Before any reset: a step and a state are answered, not crashed on.
        early = await _exchange(self.ws, {"type": "step", "data": {"action_type": "QUERY", "argument": "1"}})
        assert early["type"] == "observation", early
        assert early["data"]["done"] and "reset" in early["data"]["observation"]["error"]
        state = await _exchange(self.ws, {"type": "state"})
        assert state["type"] == "state" and state["data"]["step_count"] == 0
        self.stats["steps before reset"] += 2
        await self.restart_episode()

    async def restart_episode(self) -> None:
        self.question_id = self.rng.choice(self.question_ids)
        reply = await _exchange(self.ws, {"type": "reset", "data": {"question_id": self.question_id}})
        assert reply["type"] == "observation", reply
        assert reply["data"]["observation"]["metadata"]["question_id"] == self.question_id
        self.steps, self.done = 0, False

    async def check_intact(self) -> None:
        """The session still holds the same episode, and still plays."""
        state = await _exchange(self.ws, {"type": "state"})
        assert state["type"] == "state", state
        assert state["data"]["question_id"] == self.question_id
        assert state["data"]["step_count"] == self.steps
        assert state["data"]["done"] == self.done
        await self.restart_episode()
        step = await _exchange(
            self.ws, {"type": "step", "data": {"action_type": "QUERY", "argument": "SELECT 1"}}
        )
        assert step["type"] == "observation" and step["data"]["observation"]["error"] == "", step
        assert step["data"]["observation"]["step_count"] == 1
        self.steps = 1

    async def reconnect(self, closed: websockets.ConnectionClosed, frame: Frame) -> None:
        assert closed.rcvd is not None, f"{frame.kind}: connection dropped without a close frame"
        assert closed.rcvd.code in (1000, 1009), f"{frame.kind}: unclean close {closed.rcvd}"
        self.stats[f"closed by server after: {frame.kind}"] += 1
        await self.ws.close()
        await self.open()

    async def send(self, frame: Frame) -> bool:
        """Send one frame and check the reply; True when the server closed the connection."""
        self.stats[frame.kind] += 1
        try:
            await self.ws.send(frame.payload)
            reply = await _recv_json(self.ws)
        except websockets.ConnectionClosed as closed:
            assert frame.expect in (Expect.CLOSE, Expect.ERROR_THEN_MAYBE_CLOSE), (
                f"{frame.kind} ({frame.expect.value}) closed the connection: {closed!r}; "
                f"frame starts {frame.payload[:200]!r}"
            )
            await self.reconnect(closed, frame)
            return True
        where = f"{frame.kind}: frame starts {frame.payload[:200]!r}, reply starts {json.dumps(reply)[:300]}"
        if frame.expect is Expect.OBSERVATION:
            assert reply["type"] == "observation", where
            observation = reply["data"]["observation"]
            if frame.spends_step and not self.done:
                self.steps += 1
            assert observation["step_count"] == self.steps, where
            if frame.ends_episode:
                self.done = True
            if self.steps >= 15:  # the default budget: the episode ended
                self.done = True
            assert reply["data"]["done"] == self.done, where
        elif frame.expect is Expect.MCP_ERROR:
            assert reply["type"] == "mcp" and reply["data"].get("error"), where
        else:
            assert reply["type"] == "error", where
            assert isinstance(reply["data"].get("message"), str) and reply["data"].get("code"), where
        if frame.expect in (Expect.CLOSE, Expect.ERROR_THEN_MAYBE_CLOSE):
            # OpenEnv may close right after its error frame (OPENENV_CLOSES): find out which.
            try:
                await self.check_intact()
            except websockets.ConnectionClosed as closed:
                await self.reconnect(closed, frame)
                return True
        return False

    async def close(self) -> None:
        await self.ws.close()


async def _fuzz_one_connection(
    url: str, index: int, question_ids: list[str], stats: collections.Counter
) -> None:
    rng = random.Random(FUZZ_SEED * 100 + index)
    session = FuzzedSession(url, rng, question_ids, stats)
    await session.open()
    try:
        for n, frame in enumerate(fuzz_frames(rng, FRAMES_PER_CONNECTION), start=1):
            await session.send(frame)
            if n % CHECK_EVERY == 0:
                await session.check_intact()
        await session.check_intact()
        if index < 2:  # oversized frames: uvicorn closes with 1009 before OpenEnv reads them
            payload: str | bytes = "x" * (OPENENV_FRAME_LIMIT + 1)
            if index == 1:
                payload = payload.encode()
            assert await session.send(Frame("oversized frame", payload, Expect.CLOSE))
            await session.check_intact()
    finally:
        await session.close()


def test_ten_thousand_hostile_frames_break_nothing_and_leak_nothing(fuzz_server: RunningServer, demo_dataset):
    questions = [r.question_id for r in demo_dataset.split("train")]
    local = evaluate(SQLEnvironment(dataset=demo_dataset, split="train"), OraclePolicy(demo_dataset))
    expected = {e.question_id: e.total_reward for e in local.episodes}
    url = f"ws://127.0.0.1:{fuzz_server.port}/ws"
    stats: collections.Counter = collections.Counter()
    victim_log: list[tuple[str, str, float]] = []  # (phase, question_id, total)

    async def scenario() -> None:
        victim_rng = random.Random(FUZZ_SEED)
        async with SQLEnvClient(base_url=fuzz_server.url, message_timeout_s=REPLY_TIMEOUT_S) as victim:

            async def play(phase: str) -> None:
                qid = victim_rng.choice(questions)
                victim_log.append((phase, qid, await oracle_episode_total(victim, demo_dataset, qid)))

            for _ in range(3):
                await play("before")
            fuzzers = asyncio.gather(
                *(_fuzz_one_connection(url, i, questions, stats) for i in range(FUZZ_CONNECTIONS))
            )
            fuzzing = asyncio.ensure_future(fuzzers)
            deadline = time.monotonic() + 300
            while not fuzzing.done() and time.monotonic() < deadline:
                await play("during")
                await asyncio.sleep(0.05)
            await fuzzing
            for _ in range(3):
                await play("after")

    asyncio.run(scenario())

    frames = sum(n for kind, n in stats.items() if not kind.startswith(("closed by", "steps before")))
    print(f"\nfuzz frames: {frames}; by kind and outcome: {dict(sorted(stats.items()))}")
    print(f"victim episodes: {collections.Counter(phase for phase, _, _ in victim_log)}")
    assert frames >= 10_000
    assert (
        stats["binary frame"] > 0 and stats["closed by server after: binary frame"] == stats["binary frame"]
    )
    wrong = [(phase, qid, got, expected[qid]) for phase, qid, got in victim_log if got != expected[qid]]
    assert not wrong, f"victim rewards differ from in-process: {wrong}"
    assert any(phase == "during" for phase, _, _ in victim_log)
    deadline = time.monotonic() + 10
    while fuzz_server.get_json("/sessions")["active"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fuzz_server.get_json("/sessions")["active"] == 0
    assert fuzz_server.get_json("/health")["status"] == "healthy"
    assert fuzz_server.process.poll() is None


# ---- HTTP: schemathesis over the OpenAPI schema, in-process over ASGI -------------------------------

HTTP_EXAMPLES_PER_OPERATION = 30  # per generation mode; ~17 operations x 2 modes, ~60 s in all


def _http_checks_for(case, response) -> tuple[list, list]:
    """The checks to run on one response, and the ones left out (each with its reason)."""
    from schemathesis import checks

    run = [
        checks.not_a_server_error,
        checks.status_code_conformance,
        checks.content_type_conformance,
        checks.response_schema_conformance,
        checks.response_headers_conformance,
        checks.negative_data_rejection,
        checks.positive_data_acceptance,
    ]
    skip = []
    path = case.operation.path
    if response.status_code == 400 and b"error parsing the body" in response.content:
        # FastAPI answers a body that is not JSON with 400 "There was an error parsing the body";
        # FastAPI's generated schema documents only 200 and 422.
        skip.append(checks.status_code_conformance)
    if path.startswith("/{env_name}/") and response.status_code in (400, 404):
        # OpenEnv's task requests declare `split` as any string, indexes as any integer and the
        # path's env_name as any string; only this server's name and the dataset's splits and
        # indexes exist, so a schema-valid request can rightly get the (declared) 400 or 404.
        skip.append(checks.positive_data_acceptance)
    if path == "/step":
        # OpenEnv's StepRequest declares `action` as any object, not the environment's action
        # schema, so schema-valid actions such as {} are rightly refused with 422.
        skip.append(checks.positive_data_acceptance)
    if path == "/reset":
        # OpenEnv's ResetRequest allows any extra field of any type; SQLEnvironment accepts only
        # question_id among them and refuses the rest with 422 (create_sqlenv_app's handler).
        # And ResetRequest is a lax pydantic model: `"seed": false`, `"3"` or `3.0` are coerced
        # to an integer and accepted although the schema says integer.
        skip += [checks.positive_data_acceptance, checks.negative_data_rejection]
    return run, skip


def _sharpened_openapi(app) -> dict:
    """The app's schema with the environment's own types where OpenEnv's are open: /step's
    `action` is SQLAction's schema and /reset takes a `question_id`, so generated requests reach
    SQLEnvironment.step/reset with schema-valid yet hostile values."""
    import copy

    from sqlenv.env.models import SQLAction

    raw = copy.deepcopy(app.openapi())
    components = raw["components"]["schemas"]
    action = SQLAction.model_json_schema()
    action["properties"].pop("metadata")  # free-form; left out so the strings get the attention
    components["StepRequest"]["properties"]["action"] = action
    reset = components["ResetRequest"]
    reset["properties"]["question_id"] = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    reset["additionalProperties"] = False  # what SQLEnvironment.reset enforces (422 otherwise)
    return raw


def _fuzz_operation(operation, mode, failures: list[str], statuses: collections.Counter, **fixed) -> None:
    """Up to HTTP_EXAMPLES_PER_OPERATION generated requests to one operation, checked one by one;
    `fixed` pins parts of the request (e.g. path_parameters)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    @given(case=operation.as_strategy(generation_mode=mode, **fixed))
    @settings(
        max_examples=HTTP_EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def exercise(case) -> None:
        label = f"{case.method} {case.formatted_path} [{mode.value}]"
        try:
            response = case.call()
        except Exception as exc:  # the app raised: over a real server, a 500
            failures.append(f"{label} raised {exc!r}")
            return
        statuses[(operation.label, response.status_code)] += 1
        run, skip = _http_checks_for(case, response)
        try:
            case.validate_response(response, checks=run, excluded_checks=skip)
        except BaseException as exc:  # schemathesis raises a FailureGroup (an ExceptionGroup)
            if isinstance(exc, KeyboardInterrupt):
                raise
            failures.append(f"{label}: {str(exc)[:3000]}")

    try:
        exercise()
    except Unsatisfiable:
        # Nothing to negate (no parameters, no body, e.g. GET /health): no negative request exists.
        assert mode is GenerationMode.NEGATIVE, operation.label


def test_http_endpoints_never_answer_5xx_and_conform_to_their_schema() -> None:
    import schemathesis
    from schemathesis import GenerationMode

    from sqlenv.server.app import create_sqlenv_app

    app = create_sqlenv_app()
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    sharpened = schemathesis.openapi.from_dict(_sharpened_openapi(app))
    sharpened.app = app
    failures: list[str] = []
    statuses: collections.Counter = collections.Counter()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {"/reset", "/step", "/state", "/sessions", "/web/questions"} <= {op.path for op in operations}
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    started = time.monotonic()
    for operation in operations:
        for mode in modes:
            _fuzz_operation(operation, mode, failures, statuses)
            if "env_name" in operation.path:  # again, with the one environment name that exists
                _fuzz_operation(operation, mode, failures, statuses, path_parameters={"env_name": "sqlenv"})
    for result in sharpened.get_all_operations():
        operation = result.ok()
        if operation.path in ("/step", "/reset"):
            for mode in modes:
                _fuzz_operation(operation, mode, failures, statuses)
    elapsed = time.monotonic() - started
    print(f"\nschemathesis: {sum(statuses.values())} requests in {elapsed:.0f} s; statuses {dict(statuses)}")
    assert sum(statuses.values()) >= 400
    assert statuses[("POST /step", 200)] > 0 and statuses[("POST /reset", 200)] > 0
    server_errors = [key for key in statuses if key[1] >= 500]
    assert not server_errors, server_errors
    assert not failures, "\n\n".join(dict.fromkeys(failures))
