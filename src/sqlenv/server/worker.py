"""The app factory `sqlenv serve --workers N` gives uvicorn for its worker processes.

Each worker imports OpenEnv without its Gradio web interface (`sqlenv.server.lean_openenv`), so it
starts in a fraction of the time, then builds the app from the settings in its environment
(`sqlenv.server.app.app_from_environment`).
"""

from sqlenv.server.lean_openenv import skip_openenv_web_interface

skip_openenv_web_interface()

from sqlenv.server.app import app_from_environment  # noqa: E402  (after the line above, by design)

__all__ = ["app_from_environment"]
