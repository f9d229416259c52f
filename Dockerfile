# icemv container image: `icemv run` with a local Spark driver (Java 17) or a Spark Connect
# client, the PostgreSQL JDBC driver for Iceberg's JdbcCatalog, and no secrets.
#
#   docker build -t icemv:0.1.0 .
#   docker run --rm icemv:0.1.0 --help
#
# Every RUN step is exercised by tests/test_dockerfile.py (hadolint, the wheel build and
# install, the pinned dependency set, shell syntax), since CI has no Docker engine.
#
# bookworm, not the plain 3.11-slim tag: Debian 13 (trixie) no longer ships OpenJDK 17.

FROM python:3.11-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src

# Dependencies first (a layer that only changes with the pins): exact versions, no resolver.
COPY deploy/docker/requirements.txt deploy/docker/build-requirements.txt deploy/docker/
RUN python -m venv /opt/build \
    && /opt/build/bin/pip install --no-cache-dir --no-deps -r deploy/docker/build-requirements.txt \
    && python -m venv /opt/icemv \
    && /opt/icemv/bin/pip install --no-cache-dir --no-deps -r deploy/docker/requirements.txt

# Then icemv itself, as a wheel built with the pinned backend, into the same venv.
COPY pyproject.toml README.md ./
COPY daemon/ daemon/
RUN /opt/build/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /tmp/wheels . \
    && /opt/icemv/bin/pip install --no-cache-dir --no-deps /tmp/wheels/icemv-*.whl \
    && /opt/icemv/bin/pip check \
    && /opt/icemv/bin/icemv --help > /dev/null


FROM python:3.11-slim-bookworm AS runtime

# Java 17 for the local Spark driver; /usr/share/java/postgresql.jar for the JdbcCatalog.
# Versions are not pinned: bookworm-security replaces them, and the pinned ones vanish.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless libpostgresql-jdbc-java \
    && rm -rf /var/lib/apt/lists/* \
    && test -f /usr/share/java/postgresql.jar \
    && groupadd --system --gid 10001 icemv \
    && useradd --system --uid 10001 --gid icemv --home-dir /var/lib/icemv \
        --no-create-home --shell /usr/sbin/nologin icemv \
    && mkdir -p /var/lib/icemv /etc/icemv \
    && chown icemv:icemv /var/lib/icemv

COPY --from=build /opt/icemv /opt/icemv

# Under a read-only root file system only /tmp and /var/lib/icemv are written (Kubernetes
# mounts emptyDirs or a volume there): HOME, Spark's scratch space, the working directory
# (spark-warehouse, derby.log) and icemv's `home`. Spark's driver binds to loopback.
ENV PATH=/opt/icemv/bin:$PATH \
    HOME=/var/lib/icemv \
    TMPDIR=/tmp \
    SPARK_LOCAL_IP=127.0.0.1 \
    SPARK_LOCAL_DIRS=/tmp \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ICEMV_CONFIG=/etc/icemv/config.yaml

WORKDIR /var/lib/icemv
USER 10001:10001

# metrics.port: /metrics, /healthz, /readyz, POST /mvs/NAME/refresh
EXPOSE 9108

ENTRYPOINT ["icemv"]
CMD ["run", "--config", "/etc/icemv/config.yaml"]
