# Tether: `make run` serves the embedded defaults on http://127.0.0.1:8000, `make test` runs
# the whole suite (against PostgreSQL and Redis when DATABASE_URL / REDIS_URL are set),
# `make cluster` runs PROCESSES daphne processes behind nginx on PORT. `SERVER=uvicorn make run`
# (or make cluster, make test, the benches) serves with uvicorn instead (chatproject/servers.py).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
DEMO_USER ?= demo
DEMO_PASSWORD ?= demo-password
# Seconds per streamed word of the echo engine's replies in `make run`: a demo pace, so that a
# first look shows a reply streaming and leaves time to press Stop or queue a second message.
# `make run ECHO_DEMO_PACE=0` streams at full speed. Only `make run`: the tests start their
# own servers (settings default: 0), and `make cluster` runs at full speed.
ECHO_DEMO_PACE ?= 0.08
# daphne's 1 MiB WebSocket message cap applies to what the server sends too; a long thread's
# resume_thread payload is bigger. Inbound frames are still limited by SOCKETIO_MAX_PAYLOAD.
WS_MAX_MESSAGE ?= 33554432
DAPHNE_ARGS ?= --websocket-max-message-size $(WS_MAX_MESSAGE) --websocket-max-frame-size $(WS_MAX_MESSAGE)
UVICORN_ARGS ?= --ws-max-size $(WS_MAX_MESSAGE)
# daphne (the default) or uvicorn, each through Tether's wrapper of it; exported, so the
# tests' servers and the benches use the same one.
SERVER ?= daphne
export SERVER
ifeq ($(SERVER),uvicorn)
SERVE_MODULE := chatproject.serve_uvicorn
SERVER_ARGS ?= $(UVICORN_ARGS)
else ifeq ($(SERVER),daphne)
SERVE_MODULE := chatproject.serve
SERVER_ARGS ?= $(DAPHNE_ARGS)
else
$(error SERVER=$(SERVER): Tether runs on daphne or uvicorn)
endif
PROCESSES ?= 2

.PHONY: install run cluster test test-fast lint format bench

$(BIN)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

install: $(BIN)/.installed

# The first manage.py call generates this install's SECRET_KEY into var/secret_key (0600).
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py create_chat_user $(DEMO_USER) --password $(DEMO_PASSWORD) --if-missing
	@echo "Tether on http://$(HOST):$(PORT)/  (sign in as $(DEMO_USER) / $(DEMO_PASSWORD))"
	ECHO_DEMO_PACE=$(ECHO_DEMO_PACE) $(BIN)/python -m $(SERVE_MODULE) $(SERVER_ARGS) -b $(HOST) -p $(PORT) chatproject.asgi:application

# PROCESSES server processes (SERVER, with its SERVER_ARGS as above) on PORT+1... behind nginx on PORT,
# supervised by chatproject/cluster.py; Ctrl-C drains them, then stops nginx. Needs
# DATABASE_URL (PostgreSQL) and REDIS_URL, which the processes share, and nginx (Debian:
# apt-get install nginx-light); the first step says what is missing. Files go to var/cluster/.
cluster: install
	$(BIN)/python -m chatproject.cluster --check
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py create_chat_user $(DEMO_USER) --password $(DEMO_PASSWORD) --if-missing
	@echo "Sign in as $(DEMO_USER) / $(DEMO_PASSWORD)"
	$(BIN)/python -m chatproject.cluster --server $(SERVER) --processes $(PROCESSES) --host $(HOST) --port $(PORT) -- $(SERVER_ARGS)

test: install
	$(BIN)/pytest

# Everything that runs in this process: no daphne, browser, second server, fault or abuse
# replay (markers in pyproject.toml). The runtime state machine draws fewer examples here
# (RUNTIME_SM_EXAMPLES; `make test` runs the full 30).
FAST_MARKERS := not live and not browser and not two_process and not fault and not abuse
RUNTIME_SM_EXAMPLES ?= 3
test-fast: install
	RUNTIME_SM_EXAMPLES=$(RUNTIME_SM_EXAMPLES) $(BIN)/pytest -m "$(FAST_MARKERS)"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	$(BIN)/python bench/lifecycle.py
	$(BIN)/python bench/stream.py
	$(BIN)/python bench/stream.py --no-coalesce
	$(BIN)/python bench/send.py
	$(BIN)/python bench/echo.py
	$(BIN)/python bench/pg_turn.py
	$(BIN)/python bench/idle_sockets.py
	$(BIN)/python bench/history_media.py
