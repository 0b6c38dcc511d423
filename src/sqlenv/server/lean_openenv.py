"""OpenEnv's server package without its optional Gradio web interface, for sqlenv's own processes.

`openenv.core.env_server` imports `web_interface` (Gradio) whenever Gradio is installed, and
OpenEnv's requirements install it; sqlenv serves its own page at /web and never uses it. Importing
Gradio is most of the cost of starting a process that imports OpenEnv: `import sqlenv.server.app`
took 8 s and 207 MB of RSS with it, 2.3 s and 83 MB without (2-core machine,
`/usr/bin/time -f "%e s %M KB" python -c "import sqlenv.server.app"`). A server worker that
starts that much faster answers uvicorn's start-up health check sooner on a busy machine, and each
`--workers` process holds less memory.

OpenEnv already treats the module as optional (its `__init__` catches ModuleNotFoundError and sets
`create_web_interface_app = None`); `skip_openenv_web_interface` makes that import fail the way a
missing Gradio would, by the standard mechanism (a `None` entry in `sys.modules`). Only the `sqlenv`
command and `sqlenv serve`'s workers call it, before anything imports OpenEnv; a program that
imports sqlenv as a library keeps OpenEnv whole. tests/test_startup_under_load.py fails if a
worker or the command loads Gradio again.
"""

from __future__ import annotations

import sys
from importlib import metadata

# OpenEnv releases whose optional import of `web_interface` this was checked against.
TESTED_OPENENV = ("0.10.",)
WEB_INTERFACE = "openenv.core.env_server.web_interface"


def skip_openenv_web_interface() -> bool:
    """Make OpenEnv's server package load without its Gradio web interface, in this process.

    Returns:
        True if the web interface will be skipped; False if it is too late (OpenEnv's server package
        is already imported), OpenEnv is not installed, or its version was not checked (then
        nothing is changed).
    """
    if "openenv.core.env_server" in sys.modules:
        return WEB_INTERFACE in sys.modules and sys.modules[WEB_INTERFACE] is None
    try:
        installed = metadata.version("openenv")
    except metadata.PackageNotFoundError:
        return False
    if not installed.startswith(TESTED_OPENENV):
        return False
    sys.modules.setdefault(WEB_INTERFACE, None)  # type: ignore[arg-type]  # None: "not importable"
    return sys.modules[WEB_INTERFACE] is None
