"""`python -m sqlenv.cli`: the `sqlenv` command without its console script."""

from sqlenv.cli import app

app()
