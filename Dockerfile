FROM python:3.11-slim
WORKDIR /srv
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY workers ./workers
COPY alembic ./alembic
RUN pip install --no-cache-dir .
ENV LOOM_HOST=0.0.0.0 LOOM_PORT=8420
EXPOSE 8420
CMD ["loom-memory", "serve", "--no-worker"]
