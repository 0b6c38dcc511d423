# sqlenv's server: OpenEnv's protocol (WebSocket /ws), the web page (/web), /health, on port 8000.
#
#   docker build -t sqlenv .
#   docker run --rm -p 8000:8000 sqlenv                       # the demo set
#   docker run --rm -p 8000:8000 -v /path/to/spider:/data/spider:ro sqlenv \
#       --dataset spider10 --spider-dir /data/spider            # Spider, mounted read-only
#
# Arguments after the image name replace the default `--dataset demo` (see `sqlenv serve --help`).
# The process runs as the unprivileged user `sqlenv`; it writes only its dataset cache
# (/cache) and temporary files, so it also runs with `--read-only --tmpfs /cache --tmpfs /tmp`.
# docs/serving.md has the measured size and build time, and the Hugging Face Space route.

# Any image with Python 3.10+ and the venv module (BASE_IMAGE lets a machine that cannot pull
# python:3.11-slim build on a base made locally, e.g. with debootstrap).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV VIRTUAL_ENV=/opt/sqlenv \
    PATH=/opt/sqlenv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SQLENV_CACHE_DIR=/cache \
    SQLENV_MAX_SESSIONS=64

RUN python3 -m venv /opt/sqlenv \
    && groupadd --system --gid 10001 sqlenv \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent sqlenv \
    && mkdir /cache && chown sqlenv:sqlenv /cache

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
# A build behind a TLS-intercepting proxy passes its certificate bundle as the secret `pip_cert`
# (`docker build --secret id=pip_cert,src=/etc/ssl/certs/ca-certificates.crt`); without it,
# pip uses the image's own certificates.
RUN --mount=type=secret,id=pip_cert \
    if [ -f /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
    && pip install --no-cache-dir . \
    && rm -rf /app/src /app/build \
    && sqlenv data info --dataset demo > /dev/null \
    && rm -rf /cache/*

USER sqlenv
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"]
# uvicorn stops on SIGTERM (docker stop): open WebSocket sessions are closed, then it exits.
ENTRYPOINT ["sqlenv", "serve", "--host", "0.0.0.0", "--port", "8000"]
CMD ["--dataset", "demo"]
