# agentweb: `make run` serves the app, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install dev run test lint bench bench-postgres fuzz load

# `make run` installs what serving needs; `make test` (and the benches) add the development
# tools: pytest, Playwright, ruff, mypy, hypothesis.
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(BIN)/.dev-installed: $(BIN)/.installed
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

dev: $(BIN)/.dev-installed

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py recover_generations
	$(BIN)/python manage.py first_run --url http://$(HOST):$(PORT)/
	$(BIN)/daphne -b $(HOST) -p $(PORT) agentweb.asgi:application

test: lint
	$(BIN)/python -m pytest

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy sessions agentweb foundation

bench: dev  # every figure of docs/PERFORMANCE.md, each beside its target (about 10 minutes)
	$(BIN)/python bench/stream_overhead.py --tokens 1000 --runs 7
	$(BIN)/python bench/relay_browser.py --tokens 20000 --runs 3
	$(BIN)/python bench/read_paths.py --streams 200 --tokens 200 --delay 0.025 --runs 3
	$(BIN)/python bench/relay_batches.py --streams 200 --rate 40 --seconds 3 --runs 3
	$(BIN)/python bench/relay_batches.py --streams 200 --rate 40 --seconds 3 --runs 3 --layer redis
	$(BIN)/python bench/cancel_latency.py --runs 20
	$(BIN)/python bench/prompt_queries.py --runs 5
	$(BIN)/python bench/prompt_parts.py --runs 300
	$(BIN)/python bench/db_calls.py --runs 5
	$(BIN)/python bench/sizes.py --runs 5
	$(BIN)/python bench/page_browser.py --sizes 1000,10000 --runs 3
	$(BIN)/python bench/long_session.py
	$(BIN)/python bench/coverage.py
	$(BIN)/python bench/continuation.py
	$(BIN)/python bench/handoff_wait.py --runs 5
	$(BIN)/python bench/fork_stall.py --entries 20000
	$(BIN)/python bench/tree_page.py --entries 99000
	$(BIN)/python bench/recall.py --sessions 5 --entries 2000 --runs 9
	$(BIN)/python bench/search_scale.py --users 20 --entries 100000 --runs 5
	$(BIN)/python bench/many_sessions.py --sessions 15 --entries 10000 --runs 5
	$(BIN)/python bench/load.py --sessions 10,50,100,200 --tokens 200 --rate 40
	$(BIN)/python bench/load.py --sessions 200 --tokens 200 --rate 40 --spread 5
	$(BIN)/python bench/load.py --sessions 50,200 --tokens 200 --rate 40 --layer redis
	$(BIN)/python bench/load.py --sessions 50,200 --tokens 200 --rate 40 --layer redis-pubsub
	$(BIN)/python bench/load.py --sessions 100,400 --tokens 200 --rate 40 --layer redis --processes 2 --cancels 20
	$(BIN)/python bench/socket_memory.py --sockets 200 --layer memory
	$(BIN)/python bench/socket_memory.py --sockets 200 --layer redis
	$(BIN)/python bench/mcp_calls.py --runs 30 --sessions 50

bench-postgres: dev  # the prompt's costs and the loads on PostgreSQL, the README's set-up (BENCH_POSTGRES=postgres://user@host:port/postgres: each bench makes a database of its own there and drops it)
	@test -n "$(BENCH_POSTGRES)" || { echo "make bench-postgres needs BENCH_POSTGRES=postgres://user@host:port/postgres"; exit 2; }
	$(BIN)/python bench/prompt_queries.py --runs 5
	$(BIN)/python bench/prompt_parts.py --runs 300
	$(BIN)/python bench/db_calls.py --runs 5
	$(BIN)/python bench/search_scale.py --users 20 --entries 100000 --runs 5
	$(BIN)/python bench/many_sessions.py --sessions 15 --entries 10000 --runs 5
	$(BIN)/python bench/load.py --sessions 50,200 --tokens 200 --rate 40 --layer redis
	$(BIN)/python bench/load.py --sessions 100,400 --tokens 200 --rate 40 --layer redis --processes 2 --cancels 20

fuzz: dev  # the fuzz tests with 5,000 examples each (CI runs 150)
	HYPOTHESIS_PROFILE=long $(BIN)/python -m pytest tests/test_fuzz.py -q

load: dev  # N sessions streaming at once through one daphne process (CI runs N=10)
	$(BIN)/python bench/load.py --sessions 10,50,100,200 --tokens 200 --rate 40
