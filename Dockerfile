# specdec tuner on a GPU host: `tuner serve` (scheduled tuning jobs + dashboard) in the vLLM image,
# so the vLLM servers that the jobs start are the image's own `vllm serve`.
# Build: docker build -t specdec-tuner .          (or: docker compose build)
# Other vLLM release: docker build --build-arg VLLM_IMAGE=vllm/vllm-openai:vX.Y.Z .
# Use the vLLM release you run in production: the tuner measures that build.
ARG VLLM_IMAGE=vllm/vllm-openai:v0.33.0
FROM ${VLLM_IMAGE}

# psycopg (PostgreSQL, URL scheme postgresql+psycopg://) is not a dependency of the project;
# it is installed here so that TUNER_DB can point at the compose file's postgres service.
ARG EXTRA_PIP="psycopg[binary]>=3.1"

WORKDIR /app
COPY . /app

# vLLM's own packages (torch, numpy, fastapi, ...) are pinned as constraints: installing the
# tuner may add packages but never moves the ones vLLM was built and tested with.
# (PIP_BREAK_SYSTEM_PACKAGES only matters if the base image's Python is marked externally managed.)
RUN python3 -m pip list --format=freeze > /tmp/vllm-constraints.txt \
 && PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir -c /tmp/vllm-constraints.txt . ${EXTRA_PIP} \
 && rm /tmp/vllm-constraints.txt

# The migrations (alembic/) ship inside the package as tuner/store/migrations: the installed command needs
# nothing from /app. The image refuses to build if the schema cannot be created from it.
RUN tuner db upgrade --db sqlite:////tmp/schema-check.db && rm -f /tmp/schema-check.db*

# Results database and job logs on /data (a volume in docker-compose.yml). Flags win over these
# variables, the variables over the config file (TUNER_CONFIG). See docs/guide/deploy.md.
ENV TUNER_DB=sqlite:////data/tuner.db \
    TUNER_LOG_DIR=/data/jobs \
    TUNER_HOST=0.0.0.0 \
    TUNER_PORT=8080 \
    PYTHONUNBUFFERED=1
RUN mkdir -p /data/jobs
VOLUME ["/data"]

EXPOSE 8080

# /api/best answers without the operator token; it reads the results database.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/api/best' % os.environ.get('TUNER_PORT', '8080'), timeout=8)"]

# SIGTERM (docker stop) reaches `tuner serve`, which stops the running job's vLLM server before it
# exits: give it time (docker stop -t 180; docker-compose.yml sets stop_grace_period).
STOPSIGNAL SIGTERM
ENTRYPOINT ["tuner"]
CMD ["serve"]
