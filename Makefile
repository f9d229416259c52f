# The README's two commands: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.icemv-installed
JDBC_JARS := /usr/share/java/postgresql.jar /usr/share/java/sqlite-jdbc.jar
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install system-deps demo test test-fast lint format typecheck clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# Java 17 and the JDBC drivers Spark's Iceberg JdbcCatalog loads (Debian packages).
system-deps:
	@missing=""; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	[ -f /usr/share/java/postgresql.jar ] || missing="$$missing libpostgresql-jdbc-java"; \
	[ -f /usr/share/java/sqlite-jdbc.jar ] || missing="$$missing libxerial-sqlite-jdbc-java"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi

demo: install system-deps
	$(BIN)/icemv demo

lint: install
	$(BIN)/ruff check daemon tests
	$(BIN)/ruff format --check daemon tests

format: install
	$(BIN)/ruff format daemon tests
	$(BIN)/ruff check --fix daemon tests

typecheck: install
	$(BIN)/mypy

test: install system-deps lint typecheck
	$(BIN)/pytest -q

# Pure-logic tests only: no Spark, no database.
test-fast: install
	$(BIN)/pytest -q -m "not spark and not postgres"

clean:
	rm -rf $(VENV) lakehouse .pytest_cache .mypy_cache .ruff_cache
