# ReleaseOps Arena: OpenEnv server image for a Docker Hugging Face Space.
# Server dependencies only (pyproject core deps); no torch / training extras.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# HF Spaces run the container as uid 1000; it owns the app dir.
RUN useradd -m -u 1000 user \
 && install -d -o user -g user /home/user/app

WORKDIR /home/user/app

# Dependency layer: installed from pyproject's core `dependencies` only, so
# editing the sources does not reinstall gradio & co. (Installed as root into
# the system site-/dist-packages; console scripts such as uvicorn land in
# /usr/local/bin, on PATH for every user.)
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# Project layer: what the server runs, named file by file, so the image is the same whether the
# context is a checkout (with .dockerignore) or a Space pushed by `openenv push` (whose default
# excludes drop .dockerignore): no tests, research, docs or examples. tools/validation holds the
# oracle script openenv.yaml names. `--no-deps`: the dependencies are already there; the in-tree
# build leftovers are removed so the app dir only holds the sources.
COPY --chown=user:user pyproject.toml README.md openenv.yaml __init__.py client.py ./
COPY --chown=user:user releaseops_arena ./releaseops_arena
COPY --chown=user:user server ./server
COPY --chown=user:user client ./client
COPY --chown=user:user training ./training
COPY --chown=user:user tools/__init__.py ./tools/
COPY --chown=user:user tools/validation ./tools/validation
RUN pip install --no-cache-dir --no-deps . \
 && rm -rf build ./*.egg-info

USER user
# A Space's visitors arrive through Hugging Face's proxy, which passes each one's address in
# X-Forwarded-For: uvicorn takes it from peers on private networks only (never from the open
# internet, where the header is the client's to forge), so per-address limits see each visitor.
ENV FORWARDED_ALLOW_IPS="127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16" \
    HOME=/home/user \
    PATH=/home/user/.local/bin:$PATH \
    ENABLE_WEB_INTERFACE=true \
    ENV_README_PATH=/home/user/app/README.md \
    PORT=8000

EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('PORT', '8000'), timeout=4)"]

# `sh -c` so that PORT (e.g. `docker run -e PORT=...`) picks the port; `exec`
# makes the server PID 1 so it gets SIGTERM on `docker stop`. releaseops-serve runs
# uvicorn with the published WebSocket limits (server/limits.py); WEB_CONCURRENCY
# (unset: 1) is its --workers default: N worker processes, each with its own
# MAX_CONCURRENT_ENVS sessions (server/app.py).
CMD ["sh", "-c", "exec releaseops-serve --host 0.0.0.0 --port ${PORT:-8000}"]
