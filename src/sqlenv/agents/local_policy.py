"""`LLMPolicy`: a local transformers chat model that plays episodes through tool calls.

`LLMPolicy(model=...)` takes a local model directory, a hub id (where a hub is reachable), the
preset `smollm2-135m` or a fetched pinned model such as `qwen2.5-coder-0.5b`
(`sqlenv.agents.local_models`). Generation is greedy by default, with a per-turn token budget.

The conversation is kept as token ids that only grow (`sqlenv.agents.episode_tokens`): each reply
stays in the context exactly as the model generated it, and the environment's answer is appended
as the chat template renders it. GRPO trains on these same ids (`sqlenv.training.rollouts`), so
what is evaluated and what is trained is one sequence. A reply cut at the token limit is closed
with the end-of-turn token before the environment's turn. When the context (`max_context_tokens`)
cannot hold the next environment turn and a whole reply, that turn's result is cut (never the
system message, the examples or the question); when it cannot hold even that, the episode ends
without an answer (`ContextFull`). Each turn encodes only its new tokens: the previous call's
key/value cache (transformers) or vLLM's prefix cache holds the rest. Clones (what `--parallel N`
threads play with) share the model and a `GenerationBatcher`, so the replies they wait for at the
same time are decoded in one batch (`sqlenv.agents.batched_generation`).

`engine` chooses what generates the replies (`sqlenv.agents.engines`): `transformers` (the model
in this process, above) or `vllm` (`sqlenv.agents.vllm_engine`: one vLLM engine shared by the
policy and its clones, continuous batching and prefix caching); `auto`, the default, is vLLM where
it is installed. Both get the same prompt token ids and their replies are parsed the same way.

With `solved_examples=N` the prompt shows the N most similar solved train questions of the
database with their SQL (`sqlenv.agents.solved_examples`); a local model trained with them is
prompted with them, as its directory records, unless the caller (`sqlenv eval --solved-examples`,
`$SQLENV_SOLVED_EXAMPLES`) says otherwise. Models run where `sqlenv.agents.devices` says.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlenv.agents.batched_generation import (
    DEFAULT_GATHER_S,
    DEFAULT_MAX_BATCH,
    GenerationBatcher,
    GenerationRequest,
)
from sqlenv.agents.chat_policy import ChatToolPolicy, ContextFull, resolve_max_new_tokens
from sqlenv.agents.engines import ReplyGenerator, resolve_engine
from sqlenv.agents.episode_tokens import EpisodeTokens, message_suffix_ids
from sqlenv.agents.local_models import (
    SMOLLM2_PRESET,
    LoadedModel,
    is_named_model,
    load_chat_model,
    load_chat_tokenizer,
    model_source,
    play_dtype,
    stop_ids,
)
from sqlenv.agents.model_identity import weights_fingerprint
from sqlenv.agents.reply_formats import FORMAT_JSON, json_tool_call
from sqlenv.agents.solved_examples import SolvedExamples, read_prompt_settings
from sqlenv.agents.tools import tool_call_to_action
from sqlenv.config import DEFAULT_PROMPT_CONFIG
from sqlenv.data import Dataset
from sqlenv.env.models import SQLAction
from sqlenv.settings import solved_examples_from_environment

DEFAULT_MAX_CONTEXT_TOKENS = DEFAULT_PROMPT_CONFIG.max_context_tokens  # why: `PromptConfig.max_context_tokens`


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
        max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS,
        greedy: bool = True,
        temperature: float = 0.7,
        reuse_prefix_cache: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
        batch_gather_s: float = DEFAULT_GATHER_S,
        device: str | None = None,
        engine: str | None = None,
    ) -> None:
        if solved_examples is None:  # $SQLENV_SOLVED_EXAMPLES, else as the model was trained
            solved_examples = solved_examples_from_environment()
        if solved_examples is None:  # (none for presets and models trained before it was recorded)
            solved_examples = read_prompt_settings(model).get("solved_examples", 0)
        super().__init__(shots=shots, example_dataset=example_dataset, solved_examples=solved_examples)
        self.device = device  # None: resolved when the model loads (resolve_device)
        self.engine = resolve_engine(engine)  # "transformers" or "vllm"
        self.reuse_prefix_cache = reuse_prefix_cache
        self.max_batch = max_batch
        self.batch_gather_s = batch_gather_s  # how long a batch waits for more replies to join
        # Clones played by parallel threads share one batcher; the policy they were cloned from
        # keeps generating on its own (see clone()). With vLLM, the shared engine.
        self._batcher: ReplyGenerator | None = None
        self._batcher_for_clones: GenerationBatcher | None = None
        self._clone_lock = threading.Lock()  # worker threads clone at the same moment
        self.generated_tokens = 0  # over the policy's life (benchmarks read it)
        self.encoded_tokens = 0  # prompt tokens run through the model (the cached prefix is not)
        self._cache: Any = None
        self._cached_ids: list[int] = []
        # The episode's conversation in token ids (None until its first reply is asked for), and
        # whether replies ask the engine for their sampling log-probabilities (training does).
        self.tokens: EpisodeTokens | None = None
        self.record_logprobs = False
        self.model_name = model
        self.name = self._named(model if is_named_model(model) else Path(model).name)
        self.max_new_tokens = resolve_max_new_tokens(max_new_tokens)
        self.max_context_tokens = max_context_tokens
        self.greedy = greedy
        self.temperature = temperature
        self._loaded: LoadedModel | None = None

    @property
    def weights_fingerprint(self) -> str | None:
        """The fingerprint of a local model's weight files (`sqlenv.agents.model_identity`); None for
        presets, pinned models (their name stands for fixed weights) and hub ids. Episode journals
        record it."""
        return None if is_named_model(self.model_name) else weights_fingerprint(self.model_name)

    @property
    def context(self) -> str:
        """How the conversation is kept and how long it may grow ("tokens, 8192"): the token ids
        the model read and wrote (module docstring). Episode journals record it."""
        return f"tokens, {self.max_context_tokens}"

    @property
    def dtype(self) -> str:
        """The dtype the model computes in on this policy's device (`play_dtype`: bfloat16 or
        float32); episode journals and results record it beside the engine."""
        from sqlenv.agents.devices import resolve_device

        return play_dtype(resolve_device(self.device))

    def clone(self, *, max_batch: int | None = None) -> LLMPolicy:
        """A policy with the same settings and its own conversation. The model is shared, and so
        is a `GenerationBatcher` (when the batch size, `max_batch` or this policy's, is over 1):
        clones waiting for a reply at the same time, as parallel evaluation threads do, are
        decoded in one batch. The first clone's batch size sizes the shared batcher."""
        batch = self.max_batch if max_batch is None else max_batch
        with self._clone_lock:  # threads clone at once: build the index and load the model once
            solved = self._solved_index() or 0
            loaded = self.loaded
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
            engine=self.engine,
        )
        twin._loaded, twin._examples, twin._examples_mode = loaded, self._examples, self._examples_mode
        twin.record_logprobs = self.record_logprobs
        if self.engine == "vllm":
            twin._batcher = self._vllm_generator()
        elif batch > 1:
            with self._clone_lock:  # one batcher for all clones, however many threads ask at once
                if self._batcher_for_clones is None:
                    self._batcher_for_clones = GenerationBatcher(
                        self.loaded.model,
                        stop_ids(self.loaded),
                        max_batch=batch,
                        gather_s=self.batch_gather_s,
                    )
                twin._batcher = self._batcher_for_clones
        return twin

    @classmethod
    def from_model(
        cls,
        tokenizer: Any,
        model: Any,
        *,
        name: str = "model",
        generator: ReplyGenerator | None = None,
        **options: Any,
    ) -> LLMPolicy:
        """A policy on a model already in memory (e.g. the one being trained).

        Args:
            tokenizer: the model's tokenizer (it renders prompts and parses replies).
            model: the transformers model.
            name: the policy's name in results.
            generator: a vLLM engine that holds the same weights (`VLLMEngine` over TRL's colocated
                `LLM`, say): replies come from it, for this policy and its clones. None: from
                `model`, with transformers.
            **options: `LLMPolicy` settings.

        Returns:
            The policy.
        """
        policy = cls(name, engine="transformers" if generator is None else "vllm", **options)
        policy.name = name
        policy._loaded = LoadedModel(tokenizer, model)
        policy._batcher = generator
        return policy

    def warm_up(self) -> None:
        """Load the model now (and, with vLLM, start the engine and decode a few tokens), so that
        the first episode's reply does not pay for it. Benchmarks call it before their clock."""
        loaded = self.loaded
        if self.engine == "vllm":
            prompt = [loaded.tokenizer.eos_token_id or 0] * 4
            self._vllm_generator().generate(GenerationRequest(prompt_ids=prompt, cache=None, max_new_tokens=4))

    @property
    def loaded(self) -> LoadedModel:
        """The tokenizer, and the model when transformers generates (vLLM holds its own copy)."""
        if self._loaded is None:
            if self.engine == "vllm":
                self._loaded = load_chat_tokenizer(self.model_name)
            else:
                self._loaded = load_chat_model(self.model_name, self.device)
        return self._loaded

    @property
    def vllm_engine(self) -> ReplyGenerator:
        """The vLLM engine this policy's model runs on, started on first use and shared by every
        policy of the same model in this process (`sqlenv.agents.vllm_engine.shared_vllm_engine`)."""
        from sqlenv.agents.devices import resolve_device
        from sqlenv.agents.vllm_engine import shared_vllm_engine

        device = resolve_device(self.device)
        return shared_vllm_engine(
            model_source(self.model_name),
            stop_ids(self.loaded),
            dtype=play_dtype(device),
            max_model_len=self.max_context_tokens,
        )

    def _vllm_generator(self) -> ReplyGenerator:
        """The vLLM engine this policy generates with: the one it was given (`from_model`), else its
        model's shared engine, kept as its batcher from the first call on."""
        if self._batcher is None:
            self._batcher = self.vllm_engine
        return self._batcher

    def reset(self, observation: Any, seed: int) -> None:
        super().reset(observation, seed)
        self.tokens = None

    def _reply(self) -> tuple[SQLAction | None, str, str]:
        ids = self._context_ids()
        room = self.max_context_tokens - len(ids)
        if room <= 0:
            raise ContextFull(
                f"the conversation fills the {self.max_context_tokens}-token context: no room for a reply"
            )
        text = self._generate(ids, min(self.max_new_tokens, room))
        action, problem = self._parse(text)
        return action, problem, text

    # ---- the conversation in tokens -------------------------------------------------------------

    def _render_head(self) -> list[int]:
        """The opening prompt: system message, examples, question, tools, generation prompt."""
        rendered = self.loaded.tokenizer.apply_chat_template(
            [*self._head], tools=list(self._tools), add_generation_prompt=True, tokenize=True, return_dict=False
        )
        if hasattr(rendered, "keys"):
            rendered = rendered["input_ids"]
        return list(rendered)

    def _context_ids(self) -> list[int]:
        """The ids the next reply continues: the opening prompt at the first reply; later, the
        conversation so far with the environment's answer to the last reply appended (its result
        cut until a whole reply fits after it, `_shorten_latest_result`).

        Raises:
            ValueError: the opening prompt alone leaves no room for a reply (the context budget is
                too small for the system message, the examples and the question).
            ContextFull: the conversation cannot take the environment's answer, even cut, and a
                reply after it."""
        if self.tokens is None:
            head = self._render_head()
            if len(head) >= self.max_context_tokens:
                raise ValueError(
                    f"the opening prompt takes {len(head)} tokens and the context budget is "
                    f"{self.max_context_tokens}: raise max_context_tokens"
                )
            self.tokens = EpisodeTokens(prompt_ids=head)
            return self.tokens.ids
        tokenizer = self.loaded.tokenizer
        closing: list[int] = []
        replies = self.tokens.completion_ids
        if replies and replies[-1] not in stop_ids(self.loaded):  # cut off: end its turn first
            closing = [tokenizer.eos_token_id]
        while True:
            suffix = closing + message_suffix_ids(tokenizer, self._turns[-1], list(self._tools))
            excess = len(self.tokens) + len(suffix) + self.max_new_tokens - self.max_context_tokens
            if excess <= 0 or not self._shorten_latest_result(excess):
                break
        if len(self.tokens) + len(suffix) >= self.max_context_tokens:
            raise ContextFull(
                f"the conversation fills the {self.max_context_tokens}-token context: the environment's "
                "answer to the last reply does not fit"
            )
        self.tokens.add_environment(suffix)
        return self.tokens.ids

    # ---- model -------------------------------------------------------------------------------

    def _generate(self, ids: list[int], max_new_tokens: int) -> str:
        """Continue `ids` by at most `max_new_tokens` tokens; the reply's ids join `tokens`."""
        import torch

        loaded = self.loaded
        if self.engine == "vllm":
            self._vllm_generator()
        if self._batcher is not None:
            return self._generate_batched(ids, max_new_tokens)
        prompt = torch.tensor([ids], device=loaded.model.device)
        options: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": not self.greedy}
        if not self.greedy:
            torch.manual_seed(self._seed + len(self._turns))
            options["temperature"] = self.temperature
        cache = self._reusable_cache(prompt[0]) if self.reuse_prefix_cache else None
        reused = 0
        if cache is not None:
            options["cache"] = cache
            reused = cache.get_seq_length()
        with torch.no_grad():
            output = loaded.model.generate(
                input_ids=prompt,
                attention_mask=torch.ones_like(prompt),
                pad_token_id=loaded.tokenizer.pad_token_id or loaded.tokenizer.eos_token_id,
                return_dict_in_generate=True,
                **options,
            )
        sequence = output.sequences[0]
        new_ids = sequence[prompt.shape[1] :].tolist()
        self._take_reply(new_ids, None, max_new_tokens)
        self.encoded_tokens += int(prompt.shape[1]) - reused
        if self.reuse_prefix_cache and output.cache is not None:
            self._cache = output.cache
            self._cached_ids = sequence[: self._cache.get_seq_length()].tolist()
        return loaded.tokenizer.decode(new_ids, skip_special_tokens=False)

    def _generate_batched(self, ids: list[int], max_new_tokens: int) -> str:
        import torch

        cache = self._reusable_cache(torch.tensor(ids)) if self.reuse_prefix_cache else None
        assert self._batcher is not None
        result = self._batcher.generate(
            GenerationRequest(
                prompt_ids=list(ids),
                cache=cache,
                max_new_tokens=max_new_tokens,
                greedy=self.greedy,
                temperature=self.temperature,
                seed=self._seed + len(self._turns),
                logprobs=self.record_logprobs,
            )
        )
        self._take_reply(result.new_ids, result.logprobs, max_new_tokens)
        self.encoded_tokens += result.encoded_tokens
        if self.reuse_prefix_cache:
            self._cache, self._cached_ids = result.cache, result.cached_ids
        return self.loaded.tokenizer.decode(result.new_ids, skip_special_tokens=False)

    def _take_reply(self, new_ids: list[int], logprobs: list[float] | None, max_new_tokens: int) -> None:
        """Count a reply, note whether it was cut off, and add it to the episode's tokens."""
        self._note_cut_off(new_ids, max_new_tokens)
        self.generated_tokens += len(new_ids)
        assert self.tokens is not None  # `_context_ids` made them
        self.tokens.add_reply(new_ids, logprobs if self.record_logprobs else None)

    def _note_cut_off(self, new_ids: list[int], max_new_tokens: int) -> None:
        # Cut off: as many new tokens as the limit allows, and none of them a stop token.
        stops = stop_ids(self.loaded)
        ended = any(token in stops for token in new_ids)
        self._reply_cut_off = not ended and len(new_ids) >= max_new_tokens

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
        """The action in a reply: a call in the chat template's tags (the tokenizer's response
        schema), else a JSON object in a code fence or bare (`sqlenv.agents.reply_formats`)."""
        problem = "no tool call found"
        try:
            parsed = self.loaded.tokenizer.parse_response(text, prefix="")
        except Exception as exc:  # the parser's errors are not a stable type across versions
            parsed, problem = {}, f"unreadable reply: {exc}"
        calls = parsed.get("tool_calls") if isinstance(parsed, dict) else None
        if calls and isinstance(calls, list):
            # The schema parses whatever JSON sits between the tags: `null`, a list or a string
            # arrive as the call's "function"; they are format errors, not calls.
            function = calls[0].get("function") if isinstance(calls[0], dict) else None
            if not isinstance(function, dict):
                return None, f"the tool call is not a JSON object with a name and arguments: {function!r}"
            name, arguments = function.get("name", ""), function.get("arguments")
        else:
            found = json_tool_call(text)
            if found is None:
                return None, problem
            (name, arguments), self._reply_format = found, FORMAT_JSON
        try:
            return tool_call_to_action(name, arguments), ""
        except ValueError as exc:
            return None, str(exc)
