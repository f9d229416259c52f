# The README's two commands: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.icemv-installed
JDBC_JARS := /usr/share/java/postgresql.jar /usr/share/java/sqlite-jdbc.jar
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install system-deps demo docs test test-fast fuzz fuzz-sql fuzz-functions matrix chaos bench bench-star bench-embedded bench-latency bench-soak bench-poll bench-fleet profile-refresh bench-replicas lint format typecheck clean image image-test

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# Test-only S3 jars (tests/support/s3.py); --no-deps: the wheel pins an older pyarrow.
	$(BIN)/pip install --quiet --no-deps bodo-iceberg-connector==2026.10
	touch $@

# Java 17, javac (the tests compile their REST catalog server) and the JDBC drivers
# Spark's Iceberg JdbcCatalog loads: Debian packages, installed where missing and checked
# after (deploy/system-deps.sh; `deploy/system-deps.sh --dry-run runtime image` lists them).
system-deps:
	deploy/system-deps.sh runtime

demo: install system-deps
	$(BIN)/icemv demo

lint: install
	$(BIN)/ruff check daemon tests docs
	$(BIN)/ruff format --check daemon tests docs
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format daemon tests docs
	$(BIN)/ruff check --fix daemon tests docs

typecheck: install
	$(BIN)/mypy
	$(BIN)/mypy --strict docs/hooks.py

# The container image with buildah (no Docker engine, no registry; needs root): the Debian
# base is made with debootstrap and cached under .cache/image, like buildah's layers.
# JARS: jar files or folders of jars for Spark's classpath in the image, e.g. the S3 ones
# (deploy/docker/jars/README.md).
JARS ?=
image:
	$(SUDO) env JARS="$(JARS)" deploy/image/build.sh

# What `make test` runs: the image with the test S3 jars (tests/support/s3.py), so that
# tests/test_image.py can run the daemon in it against a REST catalog on an S3 API.
image-test: install
	@echo 'make image JARS="<the test S3 jars>"'
	@$(MAKE) image JARS="$$($(BIN)/python -m tests.support.s3)"

# The docs site (mkdocs.yml, docs/): --strict fails on broken links and pages missing from
# the navigation; docs/hooks.py generates the configuration, metrics and code-map references.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# IMAGE_TEST=0 skips building and running the image (tests/test_image.py then skips).
IMAGE_TEST ?= 1
test: install system-deps lint typecheck docs $(if $(filter 1,$(IMAGE_TEST)),image-test)
	ICEMV_REQUIRE_IMAGE=$(IMAGE_TEST) $(BIN)/pytest -q --durations=25

# The property-based oracle test with many examples, every shape on both catalog kinds
# (`make test` runs two examples per kind, half the shapes each).
FUZZ_EXAMPLES ?= 200
fuzz: install system-deps
	ICEMV_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q tests/test_incremental_oracle.py

# Generated views against the oracle (tests/test_fuzz_sql.py): FUZZ_SQL_BATCHES batches of
# FUZZ_SQL_VIEWS views, each batch through one history of FUZZ_SQL_STEPS steps, per catalog
# kind (`make test` runs one batch of 8 views); failures are shrunk within FUZZ_SQL_SHRINK
# replays and written as tests, with a JSON summary per kind, under fuzz-results/.
FUZZ_SQL_BATCHES ?= 13
FUZZ_SQL_VIEWS ?= 20
FUZZ_SQL_STEPS ?= 6
FUZZ_SQL_SHRINK ?= 40
fuzz-sql: install system-deps
	ICEMV_FUZZ_SQL_BATCHES=$(FUZZ_SQL_BATCHES) ICEMV_FUZZ_SQL_VIEWS=$(FUZZ_SQL_VIEWS) ICEMV_FUZZ_SQL_STEPS=$(FUZZ_SQL_STEPS) ICEMV_FUZZ_SQL_SHRINK=$(FUZZ_SQL_SHRINK) ICEMV_FUZZ_SQL_SEED=$${ICEMV_FUZZ_SQL_SEED:-1000} $(BIN)/pytest -q -s -p no:cacheprovider tests/test_fuzz_sql.py

# Every function of the embedded engine's table (sql/functions.py) against Spark on many
# generated argument values (make test: 40 random rows beside the edges).
FUNCTION_VALUES ?= 2000
fuzz-functions: install system-deps
	ICEMV_FUNCTION_VALUES=$(FUNCTION_VALUES) ICEMV_FUNCTION_SEED=$${ICEMV_FUNCTION_SEED:-4242} $(BIN)/pytest -q -s -p no:cacheprovider tests/test_function_corpus.py

# The case matrices (`@pytest.mark.matrix`) with every case on both catalog kinds (`make
# test` runs each case on one kind, chosen per case in tests/conftest.py).
matrix: install system-deps
	ICEMV_FULL_MATRIX=1 $(BIN)/pytest -q -m matrix

# The kill-loop test with many kills per write path (`make test` runs 5 per path).
CHAOS_KILLS ?= 50
chaos: install system-deps
	ICEMV_KILL_LOOP_KILLS=$(CHAOS_KILLS) $(BIN)/pytest -q -s tests/test_kill_loop.py

# Incremental vs full refresh, medians of BENCH_RUNS applications of each delta, on a
# merge-on-read and a copy-on-write base; BENCH_ROWS sets the base-table sizes, BENCH_ARGS
# adds options (e.g. --policy auto --shapes filter,aggregate). Draws bench-results/refresh.svg.
BENCH_ROWS ?= 1000000,10000000,50000000
BENCH_RUNS ?= 3
BENCH_ARGS ?=
bench: install system-deps
	$(BIN)/python -m tests.benchmarks.bench_refresh --rows $(BENCH_ROWS) --runs $(BENCH_RUNS) --write-mode merge-on-read,copy-on-write $(BENCH_ARGS) --out bench-results/refresh.json --chart bench-results/refresh.svg

# Star joins (a fact joined to a dimension a tenth its size, INNER and LEFT, aggregated by
# the dimension's region and the day): fact append, fact delete and dimension update,
# incremental against a full recompute, medians of STAR_RUNS, with phases, engine, rows
# read and the driver's peak memory.
STAR_SIZES ?= 10000000:1000000,50000000:5000000
STAR_RUNS ?= 3
bench-star: install system-deps
	$(BIN)/python -m tests.benchmarks.bench_star --sizes $(STAR_SIZES) --runs $(STAR_RUNS) --out bench-results/star.json

# A small append refreshed by the embedded engine (DuckDB) against Spark (medians, fleet cost).
EMBEDDED_ROWS ?= 1000000
bench-embedded: install system-deps
	$(BIN)/python -m tests.benchmarks.bench_embedded --rows $(EMBEDDED_ROWS) --append 1000 --rounds 3

# Commit-to-fresh latency, Kafka vs poll-only, and the event path alone.
LATENCY_ROWS ?= 10000000
LATENCY_COMMITS ?= 100
bench-latency: install system-deps
	$(BIN)/python -m tests.benchmarks.bench_latency --rows $(LATENCY_ROWS) --commits $(LATENCY_COMMITS) --out bench-results/latency.json

# Long-running service: commit time and storage metadata over many refreshes.
SOAK_REFRESHES ?= 2000
bench-soak: install system-deps
	$(BIN)/python -m tests.benchmarks.bench_soak --refreshes $(SOAK_REFRESHES) --out bench-results/soak.json

# What one daemon poll costs the catalog: requests, metadata reads, time (BENCH_CATALOG=rest).
POLL_MVS ?= 20
bench-poll: install system-deps
	$(BIN)/python -m tests.benchmarks.bench_poll --mvs $(POLL_MVS) --out bench-results/poll.json

# A fleet of MVs over one hot table with the daemon running, Kafka-triggered and poll-only,
# with the default config: time until all are fresh, per-MV latency, CPU per refresh by
# phase, catalog requests per poll, idle CPU. FLEET_PROCESSES=0,2 compares refresh.processes
# values (one run each) instead of the default.
FLEET_ROWS ?= 1000000
FLEET_MVS ?= 10,100,1000
FLEET_COMMITS ?= 5
FLEET_MODES ?= kafka,poll
FLEET_PROCESSES ?=
bench-fleet: install system-deps
	$(BIN)/python -m tests.benchmarks.bench_fleet --rows $(FLEET_ROWS) --mvs $(FLEET_MVS) --commits $(FLEET_COMMITS) --modes $(FLEET_MODES) $(if $(FLEET_PROCESSES),--processes $(FLEET_PROCESSES)) --out bench-results/fleet.json

# Where a small refresh's driver CPU goes: phases and cProfile's top functions.
profile-refresh: install system-deps
	$(BIN)/python -m tests.benchmarks.profile_refresh

# Refresh attempts and storage commit conflicts per commit with several daemon replicas.
REPLICAS ?= 3
bench-replicas: install system-deps
	$(BIN)/python -m tests.benchmarks.bench_replicas --replicas $(REPLICAS) --out bench-results/replicas.json

# Pure-logic tests only: no Spark, no database.
test-fast: install
	$(BIN)/pytest -q -m "not spark and not postgres"

clean:
	rm -rf $(VENV) lakehouse site .pytest_cache .mypy_cache .ruff_cache
