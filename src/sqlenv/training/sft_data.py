"""SFT warm-up data: oracle episodes with varied but sensible exploration, as chat conversations.

Each trajectory is played for real in a `SQLEnvironment`, so every tool result in it is the text
the model will read at evaluation and in GRPO. The plan per question (seeded):
- DESCRIBE each table the gold SQL uses (at most three), in a shuffled order;
- sometimes SAMPLE one of them;
- sometimes a first QUERY with a plausible mistake (a mistyped column or table), whose real error
  is shown, before the correct one; the mistaken query stays out of the loss (the model learns
  the correction, not the typo) unless `loss_on_mistakes`;
- of those, a share (`recovery_rate`, 0 by default) that recover the way an agent should: the
  table the mistyped name belongs to is not described up front but right after the error, and
  only then comes the correct query. Evaluations showed why (`docs/lab-notebook.md`, "How the episodes
  go wrong"): trained models never recover from a failed query; they answer a column name or send
  the query again.
- the gold QUERY, then ANSWER with the gold result written in the answer format (in SQL-answer
  mode, the gold SQL; `oracle_conversations_by_mode` plays the questions in several modes in turn);
- the answer's verdict, then a short closing reply without a tool call (`CLOSING_REPLY`).
Only trajectories the environment scores as correct are kept.

Why the closing reply: evaluation stops asking the model once it has answered, but TRL's GRPO loop
does not know the episode is over. It shows the answer tool's result and generates again, until a
reply has no tool call or `max_tool_calling_iterations` is reached. A model never taught to stop
goes on calling tools, which refuse (the episode is over): with the CPU config, rollouts used all
6 tool calls, a third of them refused, and the post-answer tokens were trained on with the
episode's advantage.

The conversation starts with the same system message and question message as evaluation
(`sqlenv.agents.local_policy`) and GRPO (`sqlenv.training.grpo`), and is tokenised with TRL's training
chat template (`get_training_chat_template`: the model's template plus `{% generation %}`
markers), which yields the assistant-token mask for a loss on assistant turns only.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import sqlglot
from sqlglot import exp

from sqlenv.agents.policy import table_names
from sqlenv.agents.prompts import (
    TOOL_ERROR_PREFIX,
    answer_mode_of,
    question_message,
    system_message,
    tool_result_text,
)
from sqlenv.agents.solved_examples import SolvedExamples
from sqlenv.agents.tools import action_to_tool_call, tools_for_answer_mode
from sqlenv.config import EnvConfig
from sqlenv.data import Dataset, QuestionRecord
from sqlenv.env.models import SQLAction
from sqlenv.env.verifier import format_answer

MAX_DESCRIBED_TABLES = 3
CLOSING_REPLY = "Done."  # after the answer's verdict: a reply without a tool call ends a TRL rollout


def mode_count_key(answer_mode: str) -> str:
    """The key of `sft_dataset`'s counts that holds how many examples play `answer_mode`."""
    return f"examples_{answer_mode}_mode"


@dataclass(frozen=True)
class Mistake:
    """A gold query with one identifier mistyped, and the table that identifier belongs to (None
    when the query does not say: an unqualified column in a query over several tables)."""

    sql: str
    table: str | None


def mistake(gold_sql: str, rng: random.Random) -> Mistake | None:
    """The gold SQL with one identifier mistyped as people do (a column without its suffix, a
    plural table name), or None when the statement has nothing to mistype.

    Only that identifier changes: the rest of the text is the gold query's, character for
    character. Rendering the edited tree instead would reformat the whole query (`count(*)` to
    `COUNT(*)`, `  =  ` to ` = `), and a model trained on such a mistake and its correction learns
    to answer an SQL error by reformatting the same query."""
    try:
        tree = sqlglot.parse_one(gold_sql, read="sqlite")
    except sqlglot.errors.ParseError:
        return None
    # A double-quoted "name" is a column to the parser but mostly a string to SQLite (Spider writes
    # `WHERE country = "USA"`): mistyped, it would run and return nothing instead of failing.
    columns = [c for c in tree.find_all(exp.Column) if c.name and c.name != "*" and not c.this.quoted]
    tables = [t for t in tree.find_all(exp.Table) if t.name]
    if columns and (not tables or rng.random() < 0.7):
        column = rng.choice(columns)
        name = column.name
        by_alias = {(t.alias_or_name).casefold(): t.name for t in tables}
        owner = by_alias.get(column.table.casefold()) if column.table else None
        if owner is None and len({t.name.casefold() for t in tables}) == 1:
            owner = tables[0].name
        wrong = name.rsplit("_", 1)[0] if "_" in name.strip("_") else f"{name}_name"
        identifier = column.this
    elif tables:
        table = rng.choice(tables)
        owner = table.name
        wrong = f"{table.name}s"
        identifier = table.this
    else:
        return None
    # Where the parser found the identifier in the text (its quotes included); without that, or
    # if the text there is not the name, there is nothing to edit safely.
    start, end = identifier.meta.get("start"), identifier.meta.get("end")
    if start is None or end is None:
        return None
    written = gold_sql[start : end + 1]
    quote = written[0] if written[:1] in ('"', "`", "[") and len(written) > 1 else ""
    if written.strip('"`[]') != identifier.name:
        return None
    closing = {"[": "]"}.get(quote, quote)
    return Mistake(f"{gold_sql[:start]}{quote}{wrong}{closing}{gold_sql[end + 1 :]}", owner)


def oracle_plan(
    record: QuestionRecord,
    tables: list[str],
    rng: random.Random,
    *,
    sample_rate: float,
    mistake_rate: float,
    recovery_rate: float = 0.0,
    answer_mode: str = "value",
) -> list[SQLAction]:
    described = list(record.tables_involved[:MAX_DESCRIBED_TABLES]) or tables[:1]
    rng.shuffle(described)
    plan = [SQLAction(action_type="DESCRIBE", argument=t) for t in described]
    if described and rng.random() < sample_rate:
        plan.append(SQLAction(action_type="SAMPLE", argument=rng.choice(described)))
    if rng.random() < mistake_rate:
        wrong = mistake(record.gold_sql, rng)
        if wrong is not None and wrong.sql.strip() != record.gold_sql.strip():
            culprit = next(
                (t for t in described if wrong.table and t.casefold() == wrong.table.casefold()), None
            )
            # Drawn only when recovering is on, so that recovery_rate 0 plays the same trajectories
            # as before it existed (the same seed, the same data).
            if culprit is not None and recovery_rate > 0 and rng.random() < recovery_rate:
                # Not looked at before the mistake (neither described nor sampled), then described.
                plan = [a for a in plan if a.argument != culprit]
                plan.append(SQLAction(action_type="QUERY", argument=wrong.sql))
                plan.append(SQLAction(action_type="DESCRIBE", argument=culprit))
            else:
                plan.append(SQLAction(action_type="QUERY", argument=wrong.sql))
    plan.append(SQLAction(action_type="QUERY", argument=record.gold_sql))
    answer = record.gold_sql if answer_mode == "sql" else format_answer(record.gold_answer, record.answer_type)
    plan.append(SQLAction(action_type="ANSWER", argument=answer))
    return plan


def oracle_trajectory(
    env: Any,
    record: QuestionRecord,
    rng: random.Random,
    *,
    sample_rate: float = 0.3,
    mistake_rate: float = 0.2,
    recovery_rate: float = 0.0,
    examples: SolvedExamples | None = None,
) -> list[dict[str, Any]] | None:
    """One conversation for `record` played in `env`; None when it does not end correct. With
    `examples`, the question message shows the most similar solved train questions (never the
    record's own), as evaluation's does."""
    observation = env.reset(question_id=record.question_id)
    tables = table_names(observation)  # the table list line, whether or not the schema is shown
    messages: list[dict[str, Any]] = [system_message(observation), question_message(observation, examples)]
    plan = oracle_plan(
        record,
        tables,
        rng,
        sample_rate=sample_rate,
        mistake_rate=mistake_rate,
        recovery_rate=recovery_rate,
        answer_mode=answer_mode_of(observation),
    )
    for action in plan:
        call = action_to_tool_call(action)
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        observation = env.step(action)
        messages.append(
            {"role": "tool", "name": call["function"]["name"], "content": tool_result_text(observation)}
        )
        if observation.done:
            break
    if not (observation.done and observation.metadata.get("correct")):
        return None
    return [*messages, {"role": "assistant", "content": CLOSING_REPLY}]


def oracle_conversations(dataset: Dataset, **options: Any) -> list[list[dict[str, Any]]]:
    """The conversations of `oracle_conversations_by_mode` (same arguments), without their modes."""
    return [conversation for _, conversation in oracle_conversations_by_mode(dataset, **options)]


def oracle_conversations_by_mode(
    dataset: Dataset,
    *,
    split: str = "train",
    seed: int = 0,
    max_examples: int | None = None,
    sample_rate: float = 0.3,
    mistake_rate: float = 0.2,
    recovery_rate: float = 0.0,
    clean_copies: bool = False,
    solved_examples: int = 0,
    config: EnvConfig | None = None,
    answer_modes: Sequence[str] | None = None,
) -> list[tuple[str, list[dict[str, Any]]]]:
    """Oracle conversations for the split's questions (those with a non-empty gold result), seeded,
    each with the answer mode it was played in.

    Args:
        dataset, split: where the questions come from.
        seed: orders the questions and draws each one's plan.
        max_examples: stop once this many conversations (clean copies counted) are kept.
        sample_rate, mistake_rate, recovery_rate: the plan's shares (`oracle_plan`).
        clean_copies: follow a conversation with a mistaken query by its clean copy
            (`without_mistakes`): with the mistake out of the loss, the mistake conversation
            teaches the gold query only after an error, and a model trained on those alone loses
            first-query recall.
        solved_examples: N > 0 shows the N most similar solved train questions in each question
            message (`sqlenv.agents.solved_examples`).
        config: the environment the conversations are played in (its answer mode decides what the
            answers are, unless `answer_modes`).
        answer_modes: the modes the questions are played in, in turn (the first kept conversation
            in the first, the next in the second, ...; a clean copy in its original's); None:
            `config`'s answer mode alone. A model taught one mode answers in it when asked for the
            other: the value-mode SFT model gave a value in 299 of its 726 SQL-mode answers on
            Spider dev.

    Returns:
        (answer mode, conversation) pairs.
    """
    from sqlenv.env.environment import SQLEnvironment

    base = config or EnvConfig()
    modes = list(answer_modes or [base.answer_mode])
    environments = {
        mode: SQLEnvironment(dataset=dataset, split=split, config=replace(base, answer_mode=mode))  # type: ignore[arg-type]  # checked by EnvConfig
        for mode in dict.fromkeys(modes)
    }
    examples = SolvedExamples(dataset, solved_examples) if solved_examples else None
    rng = random.Random(seed)
    records = [r for r in dataset.split(split) if not r.empty_gold]
    rng.shuffle(records)
    conversations: list[tuple[str, list[dict[str, Any]]]] = []
    played = 0  # conversations kept, copies not counted: whose turn the next mode is
    for record in records:
        if max_examples is not None and len(conversations) >= max_examples:
            break
        mode = modes[played % len(modes)]
        conversation = oracle_trajectory(
            environments[mode],
            record,
            rng,
            sample_rate=sample_rate,
            mistake_rate=mistake_rate,
            recovery_rate=recovery_rate,
            examples=examples,
        )
        if conversation is not None:
            played += 1
            conversations.append((mode, conversation))
            if clean_copies and mistaken_turns(conversation):
                conversations.append((mode, without_mistakes(conversation)))
    return conversations


def training_template(tokenizer: Any) -> str:
    """The tokenizer's chat template with TRL's generation markers (itself when it has them)."""
    from trl.chat_template_utils import get_training_chat_template

    return get_training_chat_template(tokenizer) or tokenizer.chat_template


def _failed_call(message: dict[str, Any], following: dict[str, Any] | None) -> bool:
    """Whether `message` is an assistant call whose tool result, `following`, is an error."""
    return (
        message["role"] == "assistant"
        and following is not None
        and following["role"] == "tool"
        and following["content"].startswith(TOOL_ERROR_PREFIX)
    )


def mistaken_turns(messages: list[dict[str, Any]]) -> set[int]:
    """Which assistant turns (counted among the assistant messages, from 0) sent a query that failed:
    the tool result right after them is an error."""
    assistant = [
        (message, following)
        for message, following in zip(messages, [*messages[1:], None], strict=True)
        if message["role"] == "assistant"
    ]
    return {turn for turn, (message, following) in enumerate(assistant) if _failed_call(message, following)}


def without_mistakes(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` without its mistaken queries (`mistaken_turns`) and their errors: the episode as
    the oracle plays it without the mistake. Nothing else changes: a tool result depends on its
    call alone, and the answer's verdict on the answer."""
    failed = {
        i
        for i, (message, following) in enumerate(zip(messages, [*messages[1:], None], strict=True))
        if _failed_call(message, following)
    }
    return [m for i, m in enumerate(messages) if i not in failed and i - 1 not in failed]


def tokenize_conversation(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    template: str,
    *,
    unlearned_turns: set[int] | frozenset[int] = frozenset(),
    answer_mode: str = "value",
) -> dict[str, list[int]]:
    """`input_ids` and the assistant-token mask (1 on what the model must learn to write).
    `unlearned_turns` (assistant turns counted from 0) stay in the text but out of the loss."""
    encoded = tokenizer.apply_chat_template(
        messages,
        tools=list(tools_for_answer_mode(answer_mode)),
        chat_template=template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    mask = list(encoded["assistant_masks"])
    if unlearned_turns:
        # The mask is one run of 1s per assistant turn, in order (tool results lie between them).
        runs = [i for i, m in enumerate(mask) if m and (i == 0 or not mask[i - 1])]
        assistant_turns = sum(m["role"] == "assistant" for m in messages)
        if len(runs) != assistant_turns:
            raise ValueError(f"{len(runs)} assistant spans in the mask for {assistant_turns} assistant turns")
        for turn in unlearned_turns:
            i = runs[turn]
            while i < len(mask) and mask[i]:
                mask[i] = 0
                i += 1
    return {"input_ids": list(encoded["input_ids"]), "assistant_masks": mask}


def sft_dataset(
    dataset: Dataset,
    tokenizer: Any,
    *,
    split: str = "train",
    seed: int = 0,
    max_examples: int | None = None,
    max_length: int = 1_024,
    sample_rate: float = 0.3,
    mistake_rate: float = 0.2,
    recovery_rate: float = 0.0,
    loss_on_mistakes: bool = False,
    clean_copies: bool = False,
    solved_examples: int = 0,
    config: EnvConfig | None = None,
    answer_modes: Sequence[str] | None = None,
) -> tuple[Any, dict[str, int]]:
    """A tokenised `datasets.Dataset` for TRL's SFTTrainer, and counts (kept, too long, tokens,
    and examples per answer mode). The mistaken queries are left out of the loss unless
    `loss_on_mistakes`: trained on, they teach the model to make them. `answer_modes`: as
    `oracle_conversations_by_mode`; each conversation is shown the tools of its own mode."""
    import datasets

    template = training_template(tokenizer)
    rows, too_long = [], 0
    modes: Counter[str] = Counter()
    for mode, messages in oracle_conversations_by_mode(
        dataset,
        split=split,
        seed=seed,
        max_examples=None,
        sample_rate=sample_rate,
        mistake_rate=mistake_rate,
        recovery_rate=recovery_rate,
        clean_copies=clean_copies,
        solved_examples=solved_examples,
        config=config,
        answer_modes=answer_modes,
    ):
        if max_examples is not None and len(rows) >= max_examples:
            break
        unlearned = set() if loss_on_mistakes else mistaken_turns(messages)
        row = tokenize_conversation(tokenizer, messages, template, unlearned_turns=unlearned, answer_mode=mode)
        if len(row["input_ids"]) > max_length:
            too_long += 1
            continue
        rows.append(row)
        modes[mode] += 1
    tokens = sum(len(r["input_ids"]) for r in rows)
    counts = {"examples": len(rows), "too_long": too_long, "tokens": tokens}
    counts |= {mode_count_key(mode): modes[mode] for mode in sorted(modes)}
    return datasets.Dataset.from_list(rows), counts
