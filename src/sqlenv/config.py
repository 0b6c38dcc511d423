"""Every constant that shapes sqlenv's behaviour, in one place.

`EnvConfig` holds the step budget, the sandbox limits and the reward constants. Everything else
reads them from here, so an experiment changes behaviour by passing another config, never by
editing a module. The defaults are the documented ones (README: "Reward" and "Sandbox").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

AnswerMode = Literal["value", "sql"]
ANSWER_MODES: tuple[AnswerMode, ...] = ("value", "sql")


@dataclass(frozen=True)
class SandboxLimits:
    """Bounds on one SQL statement's execution and on what is shown of its result."""

    time_limit_s: float = 5.0
    # The progress handler runs every this many SQLite VM instructions to check the deadline.
    progress_interval_ops: int = 10_000
    max_rows_shown: int = 20
    max_cell_chars: int = 80
    max_result_chars: int = 3_000
    # Rows kept (beyond those shown) for comparing a result with the gold answer, and their bytes
    # (1,000 rows of 1 MB cells must not be held to show 20 of them).
    max_rows_kept: int = 1_000
    max_kept_bytes: int = 16 * 1024 * 1024
    max_sql_chars: int = 20_000
    # sqlite3 setlimit caps (see https://www.sqlite.org/c3ref/c_limit_attached.html).
    max_string_bytes: int = 1_000_000
    max_expr_depth: int = 200
    max_compound_select: int = 64
    max_like_pattern_bytes: int = 2_000
    max_variables: int = 0
    max_function_args: int = 32
    max_columns: int = 500
    # Budgets of the guards on the built-ins SQLite cannot interrupt (`sqlenv.sandbox.guards`).
    # Worst cases measured on a 2-core machine: LIKE/GLOB/trim ~3 ns per step of pattern × text,
    # instr/replace ~0.03 ns per byte of needle × haystack; so each budget is a few tens of ms.
    max_match_steps: int = 10_000_000  # like, glob, trim/ltrim/rtrim(x, chars): len(pattern) × len(text)
    max_scan_bytes: int = 1_000_000_000  # instr, replace: len(needle) × positions in the haystack


# Limits used once, when gold answers are computed at dataset build time.
GOLD_LIMITS = SandboxLimits(time_limit_s=60.0, max_rows_kept=100_000)


def answer_sql_limits(limits: SandboxLimits) -> SandboxLimits:
    """The limits of an ANSWER's statement in SQL-answer mode: the episode's time limit, but as
    many rows kept as a gold result may have, so that every gold answer can be matched.

    Args:
        limits: the episode's sandbox limits.

    Returns:
        `limits` with GOLD_LIMITS' row and byte caps.
    """
    return replace(limits, max_rows_kept=GOLD_LIMITS.max_rows_kept, max_kept_bytes=GOLD_LIMITS.max_kept_bytes)


@dataclass(frozen=True)
class RewardConfig:
    """Reward constants. Shaping is small next to the terminal reward by construction.

    Per exploration step: +executed_bonus if the action ran, +new_info_bonus if it revealed
    something new (a table not described/sampled before, a query result not seen before),
    +repeat_penalty (negative) for an exact repeat of an earlier action, +step_cost (negative)
    always. A successful QUERY also pays progress_weight * (phi_new - phi_old), where phi is the
    binned similarity of its result to the gold rows (potential-based, so it telescopes).
    The sum is clipped to [step_clip_low, step_clip_high]. ANSWER pays only the terminal reward.

    Bound on an episode's shaping: exploration steps pay at most
    executed_bonus + new_info_bonus + step_cost = 0.02 each outside progress, and progress
    telescopes to at most progress_weight, so with the default budget of 15 the shaping total
    is at most 14 * 0.02 + 0.10 = 0.38 (< max_episode_shaping, checked by the tests).
    """

    executed_bonus: float = 0.01
    new_info_bonus: float = 0.02
    repeat_penalty: float = -0.02
    step_cost: float = -0.01
    progress_weight: float = 0.10
    # phi is floored to a multiple of 1/progress_bins, so tiny result changes pay nothing.
    progress_bins: int = 4
    step_clip_low: float = -0.10
    step_clip_high: float = 0.15
    correct_answer: float = 1.0
    wrong_answer: float = 0.0
    # phi's raw similarity of a result to the gold rows (`sqlenv.env.rewards.result_similarity`):
    # a weighted sum of cardinality (row counts' ratio) and value overlap (Dice over distinct
    # cells); when the gold answer is one number, also numeric closeness to it (1 - relative error,
    # over the first `closeness_rows` rows). Each set of weights sums to 1.
    cardinality_weight: float = 0.3
    overlap_weight: float = 0.7
    scalar_cardinality_weight: float = 0.2
    scalar_overlap_weight: float = 0.3
    scalar_closeness_weight: float = 0.5
    closeness_rows: int = 50
    # Documented invariant (tests): no episode's shaping total exceeds this.
    max_episode_shaping: float = 0.5


@dataclass(frozen=True)
class EnvConfig:
    """The episode's rules: budget, sample size, sandbox limits, rewards and what an answer is.

    `answer_mode` "value": ANSWER gives the answer itself (a value, a list, a table), graded by
    the verifier's typed rules. "sql": ANSWER gives one read-only SQL statement; it runs in the
    sandbox and is correct when its result matches the gold query's under Spider's execution
    match (`sqlenv.env.verifier.execution_match`), so success rate is execution accuracy.

    `show_schema` False: the first observation names the tables only, and the agent explores to
    learn their columns. True (a control): its `schema_info` also holds every table's CREATE TABLE
    statement, as text-to-SQL papers put the schema in the prompt; nothing else changes.
    """

    step_budget: int = 15
    answer_mode: AnswerMode = "value"
    show_schema: bool = False
    sample_rows: int = 5
    float_tolerance: float = 0.01
    # Longer ANSWER texts are wrong without being parsed (verification time grows with length).
    max_answer_chars: int = 300_000  # Spider's largest gold answer, formatted, is ~229k characters
    sandbox: SandboxLimits = field(default_factory=SandboxLimits)
    reward: RewardConfig = field(default_factory=RewardConfig)

    def __post_init__(self) -> None:
        if self.answer_mode not in ANSWER_MODES:
            raise ValueError(f"answer_mode must be one of {', '.join(ANSWER_MODES)}, not {self.answer_mode!r}")
        if not isinstance(self.show_schema, bool):
            raise ValueError(f"show_schema must be true or false, not {self.show_schema!r}")

    def with_time_limit(self, seconds: float) -> EnvConfig:
        """Return a copy whose sandbox time limit is `seconds`."""
        return replace(self, sandbox=replace(self.sandbox, time_limit_s=seconds))


DEFAULT_CONFIG = EnvConfig()


@dataclass(frozen=True)
class PromptConfig:
    """What a chat-model agent is shown and may write (`sqlenv.agents.prompts`,
    `sqlenv.agents.chat_policy`); SFT data and GRPO prompts use the same values.

    Attributes:
        tool_result_chars: characters of a tool result kept in the conversation (the environment
            already caps a result at `SandboxLimits.max_result_chars`; a small model's context is
            the tighter bound).
        max_new_tokens: tokens one reply may take: 256 fit the longest spider10 gold query as a
            tool call (173 tokens) and all but 15 of its 203 eval questions' gold answers.
        format_error_reply_chars: characters of an unparseable reply kept in the conversation.
        format_error_action_chars: characters of it sent to the environment as the invalid action.
        max_context_tokens: a local model's whole conversation (prompt, replies, results): it only
            grows during an episode (`sqlenv.agents.episode_tokens`), and 8,192 tokens hold the
            ~1,100-token prompt and 15 exchanges of a reply and a ~400-token result.
    """

    tool_result_chars: int = 1_500
    max_new_tokens: int = 256
    max_context_tokens: int = 8_192
    format_error_reply_chars: int = 400
    format_error_action_chars: int = 200


DEFAULT_PROMPT_CONFIG = PromptConfig()
