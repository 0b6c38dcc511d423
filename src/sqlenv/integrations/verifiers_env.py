"""sqlenv as a verifiers environment: `load_environment(...)` returns `SQLEnvVerifiers`.

verifiers (the Environments Hub's library, `vf-eval`, prime-rl) finds an environment by module:
`vf-eval sqlenv.integrations.verifiers_env` imports this module and calls its
`load_environment(**env_args)`. Each rollout plays one sqlenv episode (`ChatEpisode`) on a
question of the chosen dataset and split:

- the dataset rows are sqlenv's questions; each row's prompt is sqlenv's own opening (the system
  message and the question with the table names only, `sqlenv.agents.prompts`), so the schema is
  hidden exactly as in `sqlenv eval`; `info` names the question;
- the tools are sqlenv's four actions (`describe`, `sample`, `query`, `answer`, as
  `sqlenv.agents.tools` defines them for the answer mode), sent with every request;
- each reply is played as `sqlenv eval --policy openai:...` plays it (`OpenAIPolicy`): its first
  tool call, else a call written as JSON in its text; anything else is a format error, which
  spends a step, costs the step cost and tells the model what went wrong. A second call in the
  same reply is not run (its tool message says so);
- the step budget is sqlenv's (`max_turns`): the episode ends with ANSWER or when it is spent;
- the rubric's reward functions are the reward's three parts, `correctness` (the terminal
  reward), `progress` and `operational` (the shaping), weighted by `reward_weights` (default 1
  each, so the reward is sqlenv's total reward, or with `scoring="grpo"` the score sqlenv's GRPO
  gives the episode); `correct`, `answered`, `steps` and `format_errors` are metrics (weight 0).

The environment is a `vf.MultiTurnEnv` rather than a `vf.StatefulToolEnv`: a tool env runs every
call of a reply, answers a malformed call without spending a step, and ends the rollout at a reply
without a call, while a sqlenv episode plays one call per step and charges a step for a reply that
is none. A reply is played as soon as the model gives it (`add_trajectory_step`), so the reply
that spends the last step is played too, before `max_turns` would stop the rollout. A rollout the
stack cuts short (its timeout, a prompt over the context) keeps the reward the episode earned so
far, as the environment counts it (with `scoring="grpo"`, it scores as an unanswered episode).

Needs the `verifiers` extra (verifiers 0.3.x).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlenv.extras import MissingExtraError, missing_extra_message

try:
    import verifiers as vf
    from verifiers.types import AssistantMessage, Messages, State, Tool, ToolMessage, UserMessage
except ImportError as exc:  # the extra is not installed: say so before importing the rest
    raise MissingExtraError(missing_extra_message("verifiers", "sqlenv.integrations.verifiers_env")) from exc

from sqlenv.agents.prompts import TOOL_ERROR_PREFIX
from sqlenv.agents.reply_formats import FORMAT_JSON, json_tool_call
from sqlenv.agents.tools import tool_call_to_action
from sqlenv.env.models import SQLAction
from sqlenv.integrations.chat_episode import REWARD_PARTS, ChatEpisode, EpisodeSettings, PlayedStep

__all__ = ["ENV_ID", "SQLEnvVerifiers", "load_environment", "sqlenv_rubric"]

ENV_ID = "sqlenv.integrations.verifiers_env"  # what `vf-eval` and `vf.load_environment` take
FORMAT_TOOL_CALL = "tool_call"  # a call the server parsed into the reply's tool_calls
NOT_RUN = f"{TOOL_ERROR_PREFIX}not run: one tool call per reply; only the first call of a reply is played"
# State keys of this environment.
_EPISODE, _PENDING, _RESULT = "sqlenv_episode", "sqlenv_reply", "sqlenv_result"


def load_environment(
    dataset: str = "demo",
    split: str | None = "train",
    eval_split: str | None = "eval",
    answer_mode: str = "value",
    show_schema: bool = False,
    max_turns: int = 15,
    spider_dir: str | None = None,
    question_ids: Sequence[str] | None = None,
    reward_weights: Mapping[str, float] | None = None,
    scoring: str = "env",
) -> SQLEnvVerifiers:
    """The sqlenv environment for verifiers (module docstring).

    Args:
        dataset: `demo`, `spider10`, `spider` or a bring-your-own folder.
        split: the split of the training dataset (None: no training dataset).
        eval_split: the split of the evaluation dataset, which `vf-eval` plays (None: none; it
            then plays `split`).
        answer_mode: what ANSWER takes: the value ("value") or one SQL statement ("sql").
        show_schema: show the CREATE TABLE statements in the first message (a control).
        max_turns: the step budget: replies per episode, format errors included.
        spider_dir: where Spider is (else `$SQLENV_SPIDER_DIR`).
        question_ids: play only these questions (those of each split, in the split's order; a
            split that holds none of them is left out).
        reward_weights: weights of `correctness`, `progress` and `operational` (default 1 each).
        scoring: how an episode is scored (`chat_episode.SCORINGS`): "env", the environment's
            reward; "grpo", as `sqlenv train grpo` scores it.

    Returns:
        The environment.

    Raises:
        ValueError: a bad argument (both splits None, an unknown reward part, a question in
            neither split, a bad answer mode, budget or scoring).
        KeyError: an unknown split.
    """
    if split is None and eval_split is None:
        raise ValueError("split and eval_split are both None: name at least one split to play")
    settings = EpisodeSettings(
        dataset=dataset,
        split=split or str(eval_split),
        spider_dir=spider_dir,
        answer_mode=answer_mode,
        show_schema=show_schema,
        step_budget=max_turns,
        scoring=scoring,
    )
    loaded = settings.load()
    splits = [s for s in (split, eval_split) if s is not None]
    in_splits = {r.question_id for s in splits for r in loaded.split(s)}  # KeyError: an unknown split
    wanted = None if question_ids is None else [str(q) for q in question_ids]
    if wanted is not None:
        missing = [q for q in wanted if q not in in_splits]
        if missing:
            named = " and ".join(repr(s) for s in splits)
            raise ValueError(f"question_ids not in split {named} of {dataset!r}: {', '.join(missing)}")

    def rows(name: str | None) -> Callable[[], Any] | None:
        if name is None or (
            wanted is not None and not set(wanted) & {r.question_id for r in loaded.split(name)}
        ):
            return None  # no split, or none of the questions asked for is in it
        return _rows_builder(settings, name, wanted)

    return SQLEnvVerifiers(
        settings, dataset=rows(split), eval_dataset=rows(eval_split), reward_weights=reward_weights
    )


def _rows_builder(settings: EpisodeSettings, split: str, wanted: list[str] | None) -> Callable[[], Any]:
    """A builder of the split's rows as a datasets.Dataset (verifiers builds it when first used)."""

    def build() -> Any:
        from datasets import Dataset as HFDataset

        keep = None if wanted is None else set(wanted)
        records = [r for r in settings.load().split(split) if keep is None or r.question_id in keep]
        openings = settings.opening_messages([r.question_id for r in records])
        rows = []
        for record, (_, opening) in zip(records, openings, strict=True):
            rows.append(
                {
                    "prompt": opening,
                    "info": {
                        "question_id": record.question_id,
                        "db_id": record.db_id,
                        "difficulty": record.difficulty,
                        "answer_type": record.answer_type,
                    },
                }
            )
        return HFDataset.from_list(rows)

    return build


def sqlenv_rubric(reward_weights: Mapping[str, float] | None = None) -> vf.Rubric:
    """The rubric: the reward's parts as weighted reward functions, and the episode's metrics.

    Args:
        reward_weights: weight per part (`correctness`, `progress`, `operational`; missing: 1).

    Returns:
        A `vf.Rubric` whose reward with the default weights is sqlenv's total reward.

    Raises:
        ValueError: an unknown part.
    """
    weights = dict(reward_weights or {})
    unknown = sorted(set(weights) - set(REWARD_PARTS))
    if unknown:
        raise ValueError(
            f"reward_weights: unknown part(s) {unknown}; the parts are: {', '.join(REWARD_PARTS)}"
        )
    rubric = vf.Rubric()
    for part in REWARD_PARTS:
        rubric.add_reward_func(_part_reward(part), weight=float(weights.get(part, 1.0)))
    for metric in ("correct", "answered", "steps", "format_errors"):
        rubric.add_metric(_outcome_metric(metric))
    return rubric


def _part_reward(part: str) -> Callable[..., Any]:
    async def reward(state: State) -> float:
        return float(_result(state)["reward_parts"][part])

    reward.__name__ = part  # the metric's name in verifiers' results
    reward.__doc__ = f"The episode's {part} reward (sqlenv's reward part of that name)."
    return reward


def _outcome_metric(name: str) -> Callable[..., Any]:
    async def metric(state: State) -> float:
        return float(_result(state)[name])

    metric.__name__ = name
    metric.__doc__ = f"The episode's {name} (a metric: weight 0)."
    return metric


def _result(state: State) -> dict[str, Any]:
    result = state.get(_RESULT)
    if result is None:  # the rollout failed before its episode started: nothing was earned
        return {
            "reward_parts": dict.fromkeys(REWARD_PARTS, 0.0),
            "correct": False,
            "answered": False,
            "steps": 0,
            "format_errors": 0,
        }
    return result


class SQLEnvVerifiers(vf.MultiTurnEnv):
    """One sqlenv episode per rollout (module docstring).

    Args:
        settings: the episodes' dataset, answer mode, schema shown and step budget.
        dataset: the training rows (a datasets.Dataset or a builder of one), or None.
        eval_dataset: the evaluation rows, or None.
        reward_weights: the rubric's weights (`sqlenv_rubric`).
        **kwargs: other `vf.MultiTurnEnv` arguments (`timeout_seconds`, `max_seq_len`, ...).
    """

    def __init__(
        self,
        settings: EpisodeSettings,
        dataset: Any = None,
        eval_dataset: Any = None,
        reward_weights: Mapping[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        self.settings = settings
        tools = [
            Tool(name=f["name"], description=f["description"], parameters=f["parameters"])
            for f in (t["function"] for t in settings.tools())
        ]
        super().__init__(
            dataset=dataset,
            eval_dataset=eval_dataset,
            rubric=sqlenv_rubric(reward_weights),
            tool_defs=tools,
            max_turns=settings.config.step_budget,
            **kwargs,
        )

    async def setup_state(self, state: State) -> State:
        """Start the row's episode; its opening must be the row's prompt."""
        episode = self.settings.episode()
        question_id = state["info"]["question_id"]
        opening = episode.start(question_id=question_id)
        shown = [getattr(m, "content", None) for m in state["prompt"]]
        if shown != [m["content"] for m in opening]:
            raise ValueError(
                f"the prompt of question {question_id!r} is not sqlenv's opening for these settings "
                f"({self.settings}): rows must come from this environment's own datasets"
            )
        state[_EPISODE] = episode
        state[_PENDING] = []
        return state

    async def add_trajectory_step(self, state: State, trajectory_step: Any) -> None:
        """Record the model's reply and play it at once (so the reply that spends the last step
        is played before `max_turns` stops the rollout); what the model reads next waits in the
        state for `env_response`, or ends the rollout as the final response."""
        await super().add_trajectory_step(state, trajectory_step)
        episode: ChatEpisode = state[_EPISODE]
        if episode.done:
            return
        replies = [m for m in trajectory_step["completion"] if getattr(m, "role", None) == "assistant"]
        message = replies[-1] if replies else AssistantMessage(content="")
        action, problem, text, call_format = _read_message(message)
        played = await episode.play_async(action, problem, text, call_format)
        trajectory_step["extras"]["sqlenv"] = {
            "reward": played.reward,
            "reward_components": played.parts,
            "format_error": played.format_error,
        }
        answer = _answer_messages(message, played)
        if played.done:
            state[_RESULT] = episode.summary()
            state["final_env_response"] = answer
        else:
            state[_PENDING] = answer

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        """What the model reads after its last reply (played in `add_trajectory_step`)."""
        pending = state[_PENDING]
        state[_PENDING] = []
        return pending

    @vf.cleanup
    async def record_episode(self, state: State) -> None:
        """Keep the episode's outcome as plain values for the rubric and drop its environment."""
        episode = state.get(_EPISODE)
        if episode is not None:
            state[_RESULT] = episode.summary()
            episode.environment.close()
            del state[_EPISODE]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        texts = (
            getattr(p, "text", None) or (p.get("text") if isinstance(p, dict) else None) for p in content
        )
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def _read_message(message: Any) -> tuple[SQLAction | None, str, str, str | None]:
    """The reply's action as `OpenAIPolicy` reads it: its first tool call, else a call written
    as JSON in its text. Returns (action or None, the problem, the reply's text, call format)."""
    text = _text(getattr(message, "content", None))
    calls = getattr(message, "tool_calls", None) or []
    if not calls:
        found = json_tool_call(text)
        if found is None:
            return None, "no tool call found", text, None
        try:
            return tool_call_to_action(*found), "", text, FORMAT_JSON
        except ValueError as exc:
            return None, str(exc), text, None
    call = calls[0]
    try:
        return tool_call_to_action(call.name, call.arguments), "", text, FORMAT_TOOL_CALL
    except ValueError as exc:
        return None, str(exc), text or f"{call.name}({call.arguments})", None


def _answer_messages(message: Any, played: PlayedStep) -> list[Any]:
    """The tool message answering each call of the reply (the first call's result; the others
    not run), or a user message when the reply had no tool call."""
    calls = getattr(message, "tool_calls", None) or []
    if not calls:
        return [UserMessage(content=played.feedback)]
    return [ToolMessage(tool_call_id=calls[0].id, content=played.feedback)] + [
        ToolMessage(tool_call_id=call.id, content=NOT_RUN) for call in calls[1:]
    ]
