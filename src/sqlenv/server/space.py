"""A Hugging Face Docker Space of the server: the folder a Space repository holds, written from
this source checkout.

`write_space(dest, dataset)` writes exactly what a Docker Space needs and nothing else:

- `README.md`: the Space front matter (`sdk: docker`, `app_port: 8000`, `base_path: /web` so the
  Space opens on the web page, tags with `openenv`, the licence) and how to play and connect;
- `Dockerfile`: the repository's, byte for byte for `demo`; for a Spider preset, the same with a
  build step that fetches Spider inside the image (`sqlenv data download spider`, checked against
  its pinned SHA-256) and a `CMD` that serves it. Spider is CC BY-SA and never leaves this machine
  through the folder: only its task counts are read here;
- `pyproject.toml`, `src/` (the package, without bytecode or build metadata), `LICENSE`;
- `openenv.yaml` with `declared_task_count` read from the chosen dataset, and `discovery.json`.

The source files come from the checkout this package runs from (found from this module's path);
an installed wheel has none of them, and `SpaceError` says so. Everything is read and checked
before the folder is touched.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from sqlenv.data import DataError, Dataset, load_dataset
from sqlenv.data.presets import PRESET_DESCRIPTIONS, PRESETS, SPIDER_PRESETS

# Every preset can be served by a Space (a bring-your-own folder cannot: the image holds no data
# but what it builds or downloads); a Spider preset's image downloads Spider while it is built.
SPACE_DATASETS: tuple[str, ...] = PRESETS
SPIDER_DATASETS: frozenset[str] = SPIDER_PRESETS
APP_PORT = 8000  # the Dockerfile's `sqlenv serve --port`
SPIDER_IN_IMAGE = "/data/spider"
DEFAULT_TITLE = "sqlenv"
# Copied byte for byte from the checkout (the Dockerfile and openenv.yaml are derived from theirs).
COPIED_FILES: tuple[str, ...] = ("pyproject.toml", "LICENSE", "discovery.json")
# Every entry of a Space folder, in the order they are listed.
SPACE_ENTRIES: tuple[str, ...] = (
    "README.md",
    "Dockerfile",
    "pyproject.toml",
    "LICENSE",
    "openenv.yaml",
    "discovery.json",
    "src",
)
# Never part of the package a Space installs: bytecode and setuptools' metadata of the checkout.
SOURCE_IGNORED = ("__pycache__", "*.pyc", "*.pyo", "*.egg-info")
# Split order in the manifest: the order a reader expects, then any other split by name.
SPLIT_ORDER = ("train", "validation", "eval")
# The one line on the Space's card: kept within 60 characters.
SHORT_DESCRIPTION = "Answer questions about SQLite databases by exploring them"
TAGS = ("openenv", "reinforcement-learning", "sql", "text-to-sql", "tool-use", "database")

_DEMO_CMD = 'CMD ["--dataset", "demo"]\n'
_USER_LINE = "USER sqlenv\n"
_TASK_COUNT_BLOCK = re.compile(r"^(?P<indent> *)declared_task_count:\n(?:(?P=indent)  \S+: *\d+\n)+", re.M)


class SpaceError(Exception):
    """A Space folder cannot be written: the message says why and what to do."""


@dataclass(frozen=True)
class SpaceFolder:
    """A written Space folder.

    Attributes:
        path: the folder.
        dataset: the dataset its image serves.
        task_counts: questions per split, as declared in its openenv.yaml.
        entries: the files and folders written, in `SPACE_ENTRIES` order.
        kept: entries that were already in the folder and were left as they were (with `force`).
    """

    path: Path
    dataset: str
    task_counts: dict[str, int]
    entries: tuple[str, ...]
    kept: tuple[str, ...]


def repository_root() -> Path:
    """The source checkout this package runs from.

    Returns:
        The folder holding the Dockerfile, pyproject.toml, LICENSE, openenv.yaml, discovery.json
        and `src/sqlenv` (this package).

    Raises:
        SpaceError: the package is not running from a source checkout (e.g. a wheel install).
    """
    package_dir = Path(__file__).resolve().parents[1]
    root = package_dir.parents[1]
    needed = ["Dockerfile", "openenv.yaml", *COPIED_FILES]
    missing = [name for name in needed if not (root / name).is_file()]
    if package_dir != (root / "src" / "sqlenv").resolve() or missing:
        raise SpaceError(
            f"a Space is written from a source checkout of sqlenv, but the package runs from "
            f"{package_dir}, with no {', '.join(missing) or 'src/ layout'} beside it (an installed "
            "wheel has none): clone the repository, `pip install -e .` there, and run this again"
        )
    return root


def served_dataset(dataset: str, spider_dir: Path | None = None) -> Dataset:
    """The dataset a Space serves, loaded here to read its task counts.

    Args:
        dataset: `demo`, `spider10` or `spider`.
        spider_dir: the Spider directory for a Spider preset (else `$SQLENV_SPIDER_DIR`).

    Returns:
        The loaded dataset.

    Raises:
        SpaceError: an unknown dataset, or Spider not found or not loadable.
    """
    if dataset not in SPACE_DATASETS:
        raise SpaceError(f"a Space serves one of {', '.join(SPACE_DATASETS)}, not {dataset!r}")
    try:
        return load_dataset(dataset, spider_dir)
    except DataError as exc:
        if dataset in SPIDER_DATASETS:
            raise SpaceError(
                f"a Space serving {dataset} declares its task counts (openenv.yaml), read from Spider on "
                f"this machine, which is never copied into the folder: {exc}"
            ) from exc
        raise SpaceError(f"cannot read the task counts of {dataset}: {exc}") from exc


def task_counts(dataset: Dataset) -> dict[str, int]:
    """Questions per split, in manifest order.

    Args:
        dataset: a loaded dataset.

    Returns:
        {split: number of questions}: train, validation, eval first, then any other split by name.
    """
    names = sorted(dataset.split_names, key=lambda s: (SPLIT_ORDER.index(s) if s in SPLIT_ORDER else 99, s))
    return {name: len(dataset.split(name)) for name in names}


def space_dockerfile(dockerfile: str, dataset: str) -> str:
    """The Space's Dockerfile: the repository's, for a Spider preset with Spider fetched and served.

    Args:
        dockerfile: the repository's Dockerfile text.
        dataset: `demo`, `spider10` or `spider`.

    Returns:
        The Dockerfile text (unchanged for `demo`).

    Raises:
        SpaceError: the Dockerfile lacks the lines a Spider variant is made from.
    """
    if dataset not in SPIDER_DATASETS:
        return dockerfile
    for line in (_DEMO_CMD, _USER_LINE):
        if dockerfile.count(line) != 1:
            raise SpaceError(f"the Dockerfile must have the line {line.strip()!r} exactly once")
    download = (
        "# Spider 1.0 (Yu et al., 2018; CC BY-SA 4.0) is fetched from its release while the image is\n"
        "# built and checked against its pinned SHA-256 (`sqlenv data download`); this folder holds\n"
        "# none of it. The pip_cert secret serves the download too, behind a TLS-intercepting proxy.\n"
        "RUN --mount=type=secret,id=pip_cert \\\n"
        "    if [ -f /run/secrets/pip_cert ]; then export SSL_CERT_FILE=/run/secrets/pip_cert; fi \\\n"
        f"    && sqlenv data download spider --dest {SPIDER_IN_IMAGE} \\\n"
        f"    && chmod -R a+rX,go-w {SPIDER_IN_IMAGE}\n\n"
    )
    serve = f'CMD ["--dataset", "{dataset}", "--spider-dir", "{SPIDER_IN_IMAGE}"]\n'
    return dockerfile.replace(_USER_LINE, download + _USER_LINE).replace(_DEMO_CMD, serve)


def space_manifest(manifest: str, counts: dict[str, int]) -> str:
    """The Space's openenv.yaml: the repository's with `declared_task_count` set to `counts`.

    Args:
        manifest: the repository's openenv.yaml text.
        counts: questions per split of the served dataset.

    Returns:
        The manifest text, comments and layout kept.

    Raises:
        SpaceError: the manifest has no `declared_task_count` block to replace.
    """
    blocks = list(_TASK_COUNT_BLOCK.finditer(manifest))
    if len(blocks) != 1:
        raise SpaceError("openenv.yaml must have one `declared_task_count:` block of `split: count` lines")
    indent = blocks[0]["indent"]
    block = f"{indent}declared_task_count:\n" + "".join(
        f"{indent}  {split}: {n}\n" for split, n in counts.items()
    )
    written = manifest[: blocks[0].start()] + block + manifest[blocks[0].end() :]
    # The replacement must change nothing but the counts.
    before, after = yaml.safe_load(manifest), yaml.safe_load(written)
    after_counts = after["validation"]["capabilities"].pop("declared_task_count")
    before["validation"]["capabilities"].pop("declared_task_count")
    if after_counts != counts or before != after:
        raise SpaceError("openenv.yaml's declared_task_count is not where sqlenv expects it")
    return written


def space_readme(title: str, dataset: str, databases: int, counts: dict[str, int]) -> str:
    """The Space's README.md: its front matter, then what the environment is and how to use it.

    Args:
        title: the Space's display title.
        dataset: the dataset its image serves.
        databases: how many databases it holds.
        counts: questions per split of that dataset.

    Returns:
        The README text.
    """
    front = {
        "title": title,
        "emoji": "🔎",
        "colorFrom": "blue",
        "colorTo": "indigo",
        "sdk": "docker",
        "app_port": APP_PORT,
        "base_path": "/web",
        "pinned": False,
        "license": "apache-2.0",
        "short_description": SHORT_DESCRIPTION,
        "tags": list(TAGS),
    }
    splits = ", ".join(f"{split} {n}" for split, n in counts.items())
    served = PRESET_DESCRIPTIONS[dataset]
    spider_note = (
        ""
        if dataset not in SPIDER_DATASETS
        else "\nSpider 1.0 (Yu et al., 2018) is licensed CC BY-SA 4.0. The image downloads it from its\n"
        f"release while it is built and serves it from `{SPIDER_IN_IMAGE}`; this repository holds none of it.\n"
    )
    body = f"""
# {title}

An [OpenEnv](https://github.com/meta-pytorch/OpenEnv) reinforcement-learning environment: each
episode is one question about a real SQLite database whose schema the agent cannot see. It gets
the question and the table names, explores with `DESCRIBE` (a table's columns), `SAMPLE` (a few
rows) and `QUERY` (one read-only SELECT, sandboxed), then gives its `ANSWER`, within a budget of
15 steps. Each step's shaping reward lies in [-0.10, +0.15]; a correct answer pays 1.0.

This Space serves {served}: {databases} databases; questions per split: {splits}.
`reset(seed=...)` draws a question of the train split; the task API (`/sqlenv/splits`,
`/sqlenv/tasks`) lists every split's questions, never their gold answers, and
`reset(split=..., index=...)` plays any of them.
{spider_note}
## Play

- **In the browser**: the Space opens on the web page (`/web`): pick a question, explore, answer.
- **From Python**, over OpenEnv's WebSocket protocol, with the package in this repository
  (`git clone https://huggingface.co/spaces/OWNER/SPACE && pip install ./SPACE`);
  `https://OWNER-SPACE.hf.space` is this Space's address:

```python
import asyncio

from sqlenv import SQLAction
from sqlenv.server.client import SQLEnvClient


async def main() -> None:
    async with SQLEnvClient(base_url="https://OWNER-SPACE.hf.space") as env:
        result = await env.reset(seed=0)
        print(result.observation.question, result.observation.schema_info)
        table = result.observation.schema_info.removeprefix("Tables: ").split(", ")[0]
        result = await env.step(SQLAction(action_type="DESCRIBE", argument=table))
        print(result.observation.result, result.reward)


asyncio.run(main())
```

- **From the terminal**: `sqlenv play --url https://OWNER-SPACE.hf.space --dataset {dataset}`
  (a Spider dataset also needs `--spider-dir`), or evaluate a policy with `sqlenv eval --url ...`.
- **As an MCP server**: the Space speaks OpenEnv's protocol; for an MCP client, run the same
  package locally with `sqlenv mcp --dataset {dataset}` (tools `list_questions`, `start_episode`,
  `describe`, `sample`, `query`, `answer`).
- **Check it**: `openenv validate --url https://OWNER-SPACE.hf.space`.

`/health` answers `{{"status": "healthy"}}`; OpenEnv's `/docs` page lists every endpoint.
"""
    front_matter = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1_000)
    return f"---\n{front_matter}---\n{body}"


def _prepare(dest: Path, force: bool) -> tuple[str, ...]:
    """Check `dest` can take a Space; returns the entries it holds that a Space does not."""
    if dest.exists() and not dest.is_dir():
        raise SpaceError(f"{dest} exists and is not a folder")
    present = sorted(p.name for p in dest.iterdir()) if dest.is_dir() else []
    if present and not force:
        raise SpaceError(
            f"{dest} is not empty ({', '.join(present[:5])}{', ...' if len(present) > 5 else ''}): "
            "choose an empty or new folder, or pass --force to replace the Space's files in it"
        )
    return tuple(name for name in present if name not in SPACE_ENTRIES)


def write_space(
    dest: Path,
    dataset: str = "demo",
    title: str = DEFAULT_TITLE,
    spider_dir: Path | None = None,
    force: bool = False,
) -> SpaceFolder:
    """Write a Hugging Face Docker Space of the server into `dest`.

    Args:
        dest: the folder; created if absent. It must be empty unless `force`.
        dataset: what the image serves: `demo`, `spider10` or `spider`.
        title: the Space's display title.
        spider_dir: the Spider directory, read for a Spider preset's task counts only (else
            `$SQLENV_SPIDER_DIR`).
        force: replace the Space's own files and `src/` in a non-empty `dest`; any other entry
            (e.g. `.git` of a cloned Space repository) is kept as it is.

    Returns:
        What was written.

    Raises:
        SpaceError: bad arguments, a non-empty `dest` without `force`, no source checkout, or a
            dataset that cannot be read; nothing has been written then.
    """
    if not title.strip() or "\n" in title:
        raise SpaceError("the title must be one non-empty line")
    root = repository_root()
    kept = _prepare(dest, force)
    served = served_dataset(dataset, spider_dir)
    counts = task_counts(served)
    texts = {
        "README.md": space_readme(title.strip(), dataset, len({r.db_id for r in served.records}), counts),
        # Bytes decoded as they are: the demo Dockerfile is written byte for byte.
        "Dockerfile": space_dockerfile((root / "Dockerfile").read_bytes().decode("utf-8"), dataset),
        "openenv.yaml": space_manifest((root / "openenv.yaml").read_bytes().decode("utf-8"), counts),
    }
    dest.mkdir(parents=True, exist_ok=True)
    for name in SPACE_ENTRIES:
        target = dest / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
    for name, text in texts.items():
        # newline="": the text's own line endings, so the demo Dockerfile stays byte for byte.
        with open(dest / name, "w", encoding="utf-8", newline="") as out:
            out.write(text)
    for name in COPIED_FILES:
        shutil.copyfile(root / name, dest / name)
    shutil.copytree(root / "src", dest / "src", ignore=shutil.ignore_patterns(*SOURCE_IGNORED))
    return SpaceFolder(dest, dataset, counts, SPACE_ENTRIES, kept)
