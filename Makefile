# Entry points: `make serve`, `make test` (lint, format check and the whole suite) and
# `make test-fast` (the engine tier, for the edit loop); `make format` rewrites the code
# the way `make test` checks it. Everything else is plumbing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Reinstall whenever the project metadata changes.
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
SERVE_STAMP := $(VENV)/.serve-$(shell cksum pyproject.toml | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: serve test test-fast browser lint format

# setuptools warns on every editable install of a package whose folders are
# mapped (server/ -> releaseops_arena.server, see pyproject.toml); the layout is
# deliberate, so that one warning is silenced, nothing else.
export PYTHONWARNINGS := ignore:Editable installation

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# torch is pinned first: on CPU machines `torch==2.13.0` is a local CPU wheel,
# while a loose range would pull a multi-GB CUDA build.
$(STAMP): $(PY)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[train,dev,inspect]"
	touch $(STAMP) $(SERVE_STAMP)

$(SERVE_STAMP): $(PY)
	$(PY) -m pip install --quiet -e .
	touch $(SERVE_STAMP)

serve: $(SERVE_STAMP)
	ENABLE_WEB_INTERFACE=true $(VENV)/bin/releaseops-serve --host $(HOST) --port $(PORT)

# As root on Debian, the browser tests' Chromium is installed when missing
# (as .ci/run does); elsewhere those tests skip and the summary says how to enable them.
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium \
		|| { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; }; \
	fi

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: $(STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

test: lint browser
	$(PY) -m pytest

test-fast: $(STAMP)
	$(PY) -m pytest -m engine -q
