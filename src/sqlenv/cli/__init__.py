"""The `sqlenv` command (typer + rich), one module per command group: `evaluate` (eval, compare,
patterns), `data` (data info, data download), `serve`, `play`, `train` (train sft, train grpo, train
curves), `models` (models fetch, models list), `mcp` (the MCP server), `results` (results
outcomes, results recompute), `space` (space write: a Hugging Face Docker Space).

Heavy modules (OpenEnv pulls in its web server stack; torch, TRL) are imported inside the
commands, so `sqlenv --help` and `sqlenv data ...` start fast and the core install runs every
command that needs no extra.
"""

from sqlenv.server.lean_openenv import skip_openenv_web_interface

# Before any command imports OpenEnv: the command never uses OpenEnv's Gradio web interface, the
# largest part of its import time (sqlenv.server.lean_openenv).
skip_openenv_web_interface()

from sqlenv.cli import data, evaluate, mcp, models, play, results, serve, space, train  # noqa: E402, F401  (each registers its commands)
from sqlenv.cli.common import app  # noqa: E402

__all__ = ["app"]
