# A conventional image for sqlenv's server (no Docker engine was available where this was written:
# the file is kept minimal and is not built by CI). Serves the demo set on port 8000; mount Spider
# and pass --dataset spider10 --spider-dir /data/spider to serve it instead.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && sqlenv data info --dataset demo
ENV SQLENV_MAX_SESSIONS=64
EXPOSE 8000
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"
CMD ["sqlenv", "serve", "--host", "0.0.0.0", "--port", "8000", "--dataset", "demo"]
