# permission-bot: the daemon (Matrix + durable inbox + HTTP API) in a container.
#   docker build -t permission-bot .          (podman: podman build --format docker -t permission-bot .,
#                                              or the OCI default drops the HEALTHCHECK)
#   chmod 644 config.toml                     (the daemon runs as uid 10001 and must read it)
#   docker run -d --name permission-bot \
#     -v permission-bot-data:/data -v "$PWD/config.toml:/config/config.toml:ro" \
#     -e PERMISSION_BOT_MATRIX_PASSWORD -e PERMISSION_BOT_AGENT_TOKEN -e PERMISSION_BOT_DECIDER_TOKEN \
#     -p 127.0.0.1:8750:8750 permission-bot
# The config must say listen = "0.0.0.0:8750", path = "/data" and name its [[api.tokens]] by secret_env
# (see docs/deploy.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PERMISSION_BOT_IN_CONTAINER=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# a fixed non-root user; /data (the state volume) belongs to it
RUN groupadd --system --gid 10001 permbot \
 && useradd --system --uid 10001 --gid permbot --home-dir /data --no-create-home --shell /usr/sbin/nologin permbot \
 && mkdir -p /data /config \
 && chown permbot:permbot /data

# the package from this source tree
WORKDIR /src
COPY pyproject.toml README.md config.example.toml ./
COPY bot ./bot
RUN pip install . \
 && cp config.example.toml /config/config.example.toml \
 && cd / && rm -rf /src

WORKDIR /data
USER permbot
VOLUME ["/data"]
EXPOSE 8750

# where the healthcheck looks; change it with the port in api.listen
ENV PERMISSION_BOT_HEALTH_URL=http://127.0.0.1:8750/healthz
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import json, os, sys, urllib.request as u; r = u.urlopen(os.environ.get('PERMISSION_BOT_HEALTH_URL', 'http://127.0.0.1:8750/healthz'), timeout=4); sys.exit(0 if json.load(r).get('status') == 'ok' else 1)"]

ENTRYPOINT ["permission-bot"]
CMD ["run", "--config", "/config/config.toml"]
