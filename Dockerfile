# icemv container image: `icemv run` with a local Spark driver (Java 17), the PostgreSQL JDBC
# driver for Iceberg's JdbcCatalog, and no secrets. The same image runs Spark's executors when
# the Helm chart's Spark-on-Kubernetes mode is on (deploy/docker/spark-executor).
#
#   make image                     # buildah, no Docker engine needed (deploy/image/build.sh)
#   docker build -t icemv:0.1.0 .  # the same with Docker
#
# The base is Debian 12 with Debian's own Python 3.11, not python:3.11-slim: Debian ships the
# interpreter, OpenJDK 17 and the JDBC driver from one archive with one security feed, and
# `make image` can make this base itself with debootstrap where no registry is reachable.
# tests/test_image.py runs the built image; tests/test_dockerfile.py lints this file.

FROM debian:bookworm-slim AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# Dependencies first (a layer that only changes with the pins): exact versions, no resolver.
COPY deploy/docker/requirements.txt deploy/docker/build-requirements.txt deploy/docker/
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip install --no-cache-dir --no-deps -r deploy/docker/build-requirements.txt \
    && python3 -m venv /opt/icemv \
    && /opt/icemv/bin/pip install --no-cache-dir --no-deps -r deploy/docker/requirements.txt

# Then icemv itself, as a wheel built with the pinned backend, into the same venv.
COPY pyproject.toml README.md ./
COPY daemon/ daemon/
RUN /opt/build/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /tmp/wheels . \
    && /opt/icemv/bin/pip install --no-cache-dir --no-deps /tmp/wheels/icemv-*.whl \
    && /opt/icemv/bin/pip check \
    && /opt/icemv/bin/icemv --help > /dev/null \
    && /opt/icemv/bin/pip uninstall --yes pip

# Extra jars for Spark in /opt/icemv/jars/: `make image JARS="..."` stages them in
# deploy/docker/jars/ (ignored by git), e.g. S3's iceberg-aws-bundle and hadoop-aws; the
# config names them (`spark.extra_jars: [/opt/icemv/jars/*.jar]`) so that they load beside
# Iceberg's runtime, and an s3:// warehouse needs no spark.packages download at start-up.
# Without JARS the folder is empty: the image has no S3 FileIO or S3A.
COPY deploy/docker/jars/ /tmp/jars/
RUN mkdir /opt/icemv/jars \
    && find /tmp/jars -maxdepth 1 -name '*.jar' -exec cp -t /opt/icemv/jars/ {} + \
    && rm -rf /tmp/jars


FROM debian:bookworm-slim AS runtime

# Python 3.11 for the venv built above (same Debian interpreter), Java 17 for Spark, and
# /usr/share/java/postgresql.jar for the JdbcCatalog. Versions are not pinned:
# bookworm-security replaces them, and the pinned ones vanish.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 openjdk-17-jre-headless libpostgresql-jdbc-java \
    && rm -rf /var/lib/apt/lists/* \
    && test -f /usr/share/java/postgresql.jar \
    && groupadd --system --gid 10001 icemv \
    && useradd --system --uid 10001 --gid icemv --home-dir /var/lib/icemv \
        --no-create-home --shell /usr/sbin/nologin icemv \
    && mkdir -p /var/lib/icemv /etc/icemv \
    && chown icemv:icemv /var/lib/icemv

COPY --from=build /opt/icemv /opt/icemv
# Spark on Kubernetes starts executor pods of this image with this command (the chart's
# executor pod template); it runs pyspark's own jars, nothing else.
COPY deploy/docker/spark-executor /usr/local/bin/spark-executor

# Under a read-only root file system only /tmp and /var/lib/icemv are written (Kubernetes
# mounts emptyDirs or a volume there): HOME, Spark's scratch space, the working directory
# (spark-warehouse, derby.log) and icemv's `home`. Spark's driver binds to loopback unless
# the chart's Spark-on-Kubernetes mode sets spark.driver.host/bindAddress.
ENV PATH=/opt/icemv/bin:$PATH \
    HOME=/var/lib/icemv \
    TMPDIR=/tmp \
    SPARK_HOME=/opt/icemv/lib/python3.11/site-packages/pyspark \
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
