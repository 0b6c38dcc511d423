"""How long the shown schema (`EnvConfig.show_schema`) is on Spider dev's databases: characters of
sqlenv's rendering (the table list line, a blank line, one CREATE TABLE statement per table)
beside those of the DDL SQLite stores (`sqlite_master.sql`), and, with --tokenizer, the tokens of
each in that model's tokenizer.

    .venv/bin/python scripts/shown_schema_sizes.py --spider-dir ../shared/spider [--tokenizer qwen2.5-coder-0.5b]

docs/environment.md ("Schema shown") quotes its output.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from sqlenv.sandbox.schema import DatabaseCatalog


def stored_ddl(path: Path) -> str:
    """The CREATE TABLE statements SQLite stores for the file's tables, in name order."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        rows = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
        return "\n".join(sql for (sql,) in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--spider-dir", type=Path, required=True, help="the Spider folder (dev.json, database/)"
    )
    parser.add_argument(
        "--tokenizer", help="also count tokens with this model's tokenizer (a fetched preset)"
    )
    args = parser.parse_args()

    dev = sorted({q["db_id"] for q in json.loads((args.spider_dir / "dev.json").read_text(encoding="utf-8"))})
    count: Callable[[str], int] | None = None
    if args.tokenizer:
        from sqlenv.agents.local_models import load_chat_tokenizer

        tokenizer = load_chat_tokenizer(args.tokenizer).tokenizer
        count = lambda text: len(tokenizer(text)["input_ids"])  # noqa: E731
    rows = []
    for db_id in dev:
        path = args.spider_dir / "database" / db_id / f"{db_id}.sqlite"
        if not path.is_file():
            print(f"{db_id}: not in this Spider release")
            continue
        shown, stored = DatabaseCatalog.open(path).schema_text, stored_ddl(path)
        sizes = [len(shown), len(stored)] + ([count(shown), count(stored)] if count else [])
        rows.append((db_id, sizes))
    columns = ["shown chars", "stored chars"] + (["shown tokens", "stored tokens"] if count else [])
    print(f"{'database':<30}" + "".join(f"{c:>15}" for c in columns))
    for db_id, sizes in sorted(rows, key=lambda row: row[1][0]):
        print(f"{db_id:<30}" + "".join(f"{s:>15,}" for s in sizes))
    for name, summary in (("median", statistics.median), ("largest", max), ("total", sum)):
        print(
            f"{name:<30}"
            + "".join(f"{summary([r[1][i] for r in rows]):>15,.0f}" for i in range(len(columns)))
        )
    print(f"{len(rows)} databases")


if __name__ == "__main__":
    main()
