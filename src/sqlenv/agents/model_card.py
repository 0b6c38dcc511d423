"""The model card of a published model: the `README.md` beside its adapters, written from facts.

`render_card` fills one template (`CARD_TEMPLATE`) from the manifest (`sqlenv.agents.published_models`)
and the facts of the run it was published from (`RunFacts`): the base model and its pinned GGUF
sha256, the adapters with their steps and hashes, the data, the config and code commit, the results
with the commands that produced them (a Markdown file the publisher writes, inserted as it is), and
the licence. The card holds no number the publisher did not give or measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CARD_TEMPLATE", "RunFacts", "render_card"]

CARD_TEMPLATE = """\
---
license: {licence_id}
library_name: peft
base_model: {base_title}
tags: [sqlenv, text-to-sql, tool-calling, lora]
---

# {name}

LoRA adapters for {base_title}, trained with sqlenv ({phase_list}) to answer questions about
SQLite databases by exploring them with tool calls (`describe`, `sample`, `query`, `answer`).

## Use

```bash
sqlenv models fetch {base}     # the base model's weights, hash-checked
sqlenv eval --policy {name} --dataset {dataset} --split eval --answer-mode {answer_mode}{schema_flag}
```

(Spider's presets need `--spider-dir DIR` or `$SQLENV_SPIDER_DIR`.)

Loading checks every adapter file against `manifest.json` (also `sha256sum -c SHA256SUMS`), merges
the adapters into the base in order and keeps the merged checkpoint in the sqlenv cache.

## Base model

| | |
|---|---|
| name | `{base}` ({base_title}) |
| weights | `{gguf_name}`, sha256 `{gguf_sha256}` |
| checkpoint the run trained from | {base_checkpoint_dtype} (the GGUF de-quantised by `sqlenv models fetch`) |
| licence | {base_licence} |

## Adapters

| phase | folder | steps | adapter dtype | sha256 of adapter_model.safetensors |
|---|---|---|---|---|
{adapter_rows}

## Training

- Data: the `{dataset}` preset's train split; answers in {answer_mode} mode{phase_modes}; schema {schema}; {solved}.
- Config: `train-config.yaml` (copied from `{config}`); code at commit `{commit}`.
- Run folder when published: `{run}`.
- {final_check}{resume}

## Results

{results}

## Licence

The adapters: Apache-2.0. The base model: {base_licence}.
"""


@dataclass(frozen=True)
class RunFacts:
    """What a card says about the run beyond the manifest.

    Attributes:
        dataset: the training config's dataset preset.
        config: the training config's path as the publisher named it.
        commit: the code commit the run was trained with (as the publisher gave it).
        run: the run folder the adapters came from.
        results: Markdown with the metrics and the commands that produced them; empty: none.
        phase_modes: (phase, the answer modes it trained in) where a phase's differ from the
            config's `answer_mode` (an SFT warm-up in both modes, say).
    """

    dataset: str
    config: str
    commit: str
    run: str
    results: str = ""
    phase_modes: tuple[tuple[str, str], ...] = ()


def render_card(manifest: dict[str, Any], facts: RunFacts) -> str:
    """The model card of a published model.

    Args:
        manifest: the model's manifest (`sqlenv.agents.published_models.MANIFEST`), as written.
        facts: the run's facts.

    Returns:
        The card's Markdown text.
    """
    base = manifest["base"]
    files = manifest["files"]
    rows = "\n".join(
        f"| {p['phase']} | `{p['folder']}/` | {p['steps'] if p['steps'] is not None else 'not recorded'} "
        f"| {p['adapter_dtype']} | `{files[p['folder'] + '/adapter_model.safetensors']}` |"
        for p in manifest["phases"]
    )
    check = manifest.get("final_check")
    if check is None:
        final_check = "Not checked against the run's merged final model."
    else:
        final_check = (
            f"Merging these adapters into the base gave the run's `{check['final']}`: "
            f"{check['tensors']} tensors, largest absolute difference {check['max_abs_diff']:g}."
        )
    solved = manifest["solved_examples"]
    last = manifest["phases"][-1]
    resume = (
        f"\n- A checkpoint, not a finished run: `{last['folder']}/resume/` holds step {last['steps']}'s resume "
        f"state, and `sqlenv train grpo --config train-config.yaml --resume-from {manifest['name']}` "
        "continues the run on any machine (the optimiser's moments start afresh)."
        if last.get("resume")
        else ""
    )
    return CARD_TEMPLATE.format(
        licence_id="apache-2.0",
        name=manifest["name"],
        base=base["model"],
        base_title=base["title"],
        base_licence=base["licence"],
        gguf_name=base["gguf_name"],
        gguf_sha256=base["gguf_sha256"],
        base_checkpoint_dtype=base["checkpoint_dtype"],
        phase_list=" then ".join(p["phase"].upper() for p in manifest["phases"]),
        adapter_rows=rows,
        dataset=facts.dataset,
        answer_mode=manifest["answer_mode"],
        schema_flag=" --show-schema" if manifest["show_schema"] else "",
        schema="shown (every table's CREATE TABLE)"
        if manifest["show_schema"]
        else "hidden (table names only)",
        phase_modes=" (" + "; ".join(f"{phase.upper()}: {modes}" for phase, modes in facts.phase_modes) + ")"
        if facts.phase_modes
        else "",
        solved=f"{solved} solved train questions in the prompt"
        if solved
        else "no solved examples in the prompt",
        config=facts.config,
        commit=facts.commit,
        run=facts.run,
        final_check=final_check,
        resume=resume,
        results=facts.results.strip() or "None recorded in this card.",
    )
