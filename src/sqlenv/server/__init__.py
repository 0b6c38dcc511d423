"""Serving the environment the OpenEnv way: the FastAPI app with its WebSocket sessions and web
page (`app`, what openenv.yaml points at) and the typed client (`client`)."""
