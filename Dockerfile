# The production image: the wheel without the `embedded` extra (PostgreSQL and Redis are
# external: DATABASE_URL, REDIS_URL), run as an unprivileged user. One image for every role:
# `loom-memory serve --no-worker` (the default), `loom-memory worker`, `loom-memory migrate`
# (the Alembic scripts ship inside the package). See docker-compose.yml.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY workers ./workers
COPY alembic ./alembic
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LOOM_HOST=0.0.0.0 LOOM_PORT=8420
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && groupadd --system --gid 10001 loom \
    && useradd --system --uid 10001 --gid loom --home-dir /srv --create-home \
        --shell /usr/sbin/nologin loom
# numeric, so a runtime that enforces non-root (Kubernetes runAsNonRoot) can check it
USER 10001:10001
WORKDIR /srv
EXPOSE 8420
# slim has no curl: the process answers on its port (the worker and migrate override this)
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('LOOM_PORT', '8420'), timeout=4)"]
CMD ["loom-memory", "serve", "--no-worker"]
