"""Episode journals: an evaluation that can stop and continue where it stopped.

A language-model evaluation of a few hundred questions can take hours on a CPU. With a journal,
`evaluate()` appends every finished episode to a JSON-lines file as it finishes; run again with the
same journal, it loads those episodes and plays only the missing ones. Episode i always plays
question i of the run's plan with a seed derived from (seed, i), so the continued run's episodes
are the ones an uninterrupted run would have played.

The first line is a header naming the run (policy, dataset, split, seed, a digest of the episode
plan, for a local model the fingerprint of its weights, `sqlenv.agents.model_identity`, and for a
language model its per-reply token limit, how the solved examples in its prompt are ranked,
`sqlenv.agents.solved_examples`, the engine, dtype and decoding, and whether the environment showed
the schema, `EnvConfig.show_schema`); a journal from a different run is refused rather than mixed
in: a model retrained into the same folder, given room for longer replies, shown other examples or
the schema, or sampled instead of decoded greedily is another run. A last line cut short
by a crash is ignored (that episode is played again).

A run that plays holds an exclusive lock on its journal (`fcntl.flock`, released by `close()` or
when the process ends, however it ends). A second run started on the same journal is refused
at once: it would play the episodes the first is playing and record them twice, and its load could
cut the first one's half-written last line. Reading a journal (a report of the results so far,
`play=False`) takes no lock and writes nothing, so it works beside the run that writes it.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, and no guard against a second writer
    fcntl = None  # type: ignore[assignment]

from sqlenv.evaluation.records import EpisodeRecord, Job

JOURNAL_FORMAT = "sqlenv-episode-journal/1"
# Journals written before the header recorded `max_new_tokens` came from chat policies that all
# used 96 tokens per reply; such a journal is that run's.
LEGACY_MAX_NEW_TOKENS = 96
# Journals written before the header recorded `engine` came from local models that transformers ran.
LEGACY_ENGINE = "transformers"
# Journals written before the header recorded `decoding` came from language models decoding greedily.
LEGACY_DECODING = "greedy"
# Journals written before the header recorded `examples_ranking` that showed solved examples ranked
# them by the question alone.
LEGACY_EXAMPLES_RANKING = "question"
# Journals written before the header recorded `show_schema` came from environments that hid it.
LEGACY_SHOW_SCHEMA = False
# Journals written before the header recorded `context` came from local models whose conversation
# was rendered again from its messages at every turn (each call in the template's own form, the
# oldest turns dropped past 2,048 tokens), not kept as the token ids the model read and wrote.
LEGACY_CONTEXT = "messages, 2048"


class JournalInUse(ValueError):
    """The journal is being written by another running evaluation."""


def _plan_digest(jobs: Sequence[Job]) -> str:
    text = "\n".join(f"{i}\t{qid}\t{seed}" for i, qid, seed in jobs)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class EpisodeJournal:
    """A JSON-lines file of the finished episodes of one evaluation run (module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        policy: str,
        dataset: str,
        split: str,
        seed: int,
        jobs: Sequence[Job],
        weights: str | None = None,
        max_new_tokens: int | None = None,
        examples_ranking: str | None = None,
        engine: str | None = None,
        dtype: str | None = None,
        decoding: str | None = None,
        show_schema: bool = False,
        context: str | None = None,
        write: bool = True,
    ):
        self.path = Path(path)
        self.write = write
        self.header = {
            "format": JOURNAL_FORMAT,
            "policy": policy,
            "dataset": dataset,
            "split": split,
            "seed": seed,
            "episodes": len(jobs),
            "plan": _plan_digest(jobs),
            "weights": weights,  # None for policies without weights of their own (and older journals)
            "max_new_tokens": max_new_tokens,  # None for policies that generate no text
            "examples_ranking": examples_ranking,  # None for prompts without solved examples
            # What generated the replies: engines differ in floating-point detail, so a greedy
            # run continued on another engine would not be the run it started as.
            "engine": engine,  # None for policies that generate no text here
            # The dtype the model computed in, for the same reason: bfloat16 and float32 decide
            # near-ties differently, and `auto` picks by CPU, so machines of two kinds would differ.
            "dtype": dtype,  # None for policies that generate no text here
            # "greedy" or "temperature T": sampled episodes are other episodes than greedy ones.
            "decoding": decoding,  # None for policies that generate no text
            # The schema-shown control is another experiment than the hidden-schema run.
            "show_schema": show_schema,
            # How a local model's conversation is kept, and its length (`LLMPolicy.context`): the
            # same model plays other episodes with another context. None for other policies.
            "context": context,
        }
        self._lock = threading.Lock()
        self._held: IO[Any] | None = None
        self.done: dict[int, EpisodeRecord] = {}
        if write:
            self._hold()
        try:
            if self.path.exists() and self.path.stat().st_size > 0:
                self._load()
            elif write:
                self.path.write_text(json.dumps(self.header) + "\n", encoding="utf-8")
        except BaseException:
            self.close()
            raise

    def _hold(self) -> None:
        """Take the journal's exclusive lock, or refuse: another run is writing it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a", encoding="utf-8")  # creates it; changes nothing that exists
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise JournalInUse(
                    f"{self.path} is being written by another evaluation that is still running; "
                    "a second one would play its episodes again and record them twice. "
                    "Wait for it to finish, or use another journal file."
                ) from None
        self._held = handle

    def close(self) -> None:
        """Release the lock (a journal that only reads holds none)."""
        if self._held is not None:
            self._held.close()  # closing the descriptor releases the flock
            self._held = None

    def _load(self) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        try:
            header = json.loads(lines[0])
        except (json.JSONDecodeError, IndexError):
            raise ValueError(f"{self.path} is not an episode journal (no header line)") from None
        if not isinstance(header, dict) or header.get("format") != JOURNAL_FORMAT:
            raise ValueError(f"{self.path} is not an episode journal ({JOURNAL_FORMAT})")
        if "max_new_tokens" not in header and self.header["max_new_tokens"] is not None:
            header["max_new_tokens"] = LEGACY_MAX_NEW_TOKENS
        if "engine" not in header and self.header["engine"] is not None:
            header["engine"] = LEGACY_ENGINE  # local models generated with transformers alone
        if "decoding" not in header and self.header["decoding"] is not None:
            header["decoding"] = LEGACY_DECODING
        if "show_schema" not in header:
            header["show_schema"] = LEGACY_SHOW_SCHEMA
        if "context" not in header and self.header["context"] is not None:
            header["context"] = LEGACY_CONTEXT
        if "dtype" not in header:  # not recorded then, so nothing to hold this run to
            header["dtype"] = self.header["dtype"]
        if "examples_ranking" not in header and re.search(r"-\d+solved$", str(header.get("policy"))):
            header["examples_ranking"] = LEGACY_EXAMPLES_RANKING  # a "<model>-<k>shot-<n>solved" run
        differences = [
            f"{key} {header.get(key)!r} (this run: {value!r})"
            for key, value in self.header.items()
            if header.get(key) != value
        ]
        if differences:
            raise ValueError(
                f"{self.path} is the journal of another run: "
                + "; ".join(differences)
                + ". Use another journal file, or delete this one to start over."
            )
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
                self.done[int(entry["index"])] = EpisodeRecord.from_json(entry["episode"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                if number == len(lines):  # the last line, cut short when the run was stopped
                    if self.write:
                        self.path.write_text("".join(line + "\n" for line in lines[:-1]), encoding="utf-8")
                    break
                raise ValueError(f"{self.path} line {number} is not a journal entry") from None

    def record(self, index: int, episode: EpisodeRecord) -> None:
        """Append one finished episode (flushed at once, so a stop loses only unfinished ones)."""
        if not self.write:
            raise RuntimeError(f"{self.path} was opened to read, not to record episodes")
        line = json.dumps({"index": index, "episode": asdict(episode)}, ensure_ascii=False)
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
        self.done[index] = episode
