"""A real S3 API for tests (moto's server) and the S3FileIO jars Spark needs to reach it.

No reachable registry ships Iceberg's `iceberg-aws-bundle` or `hadoop-aws`. The wheel
`bodo-iceberg-connector==2026.10` (installed with `--no-deps` by `make install`: it pins
an older pyarrow) carries `iceberg-aws-1.5.2.jar` with the AWS SDK v2 2.29.26 module jars
(S3FileIO, which Iceberg's Spark runtime 1.10.2 accepts for everything icemv does) and
`hadoop-aws-3.3.3` with the AWS SDK v1 1.12.382 jars (S3A, for the delete files Spark
reads by path). Production should use the official shaded
`org.apache.iceberg:iceberg-aws-bundle` of the runtime's version and
`org.apache.hadoop:hadoop-aws` of Spark's Hadoop version (3.3.4).
"""

from __future__ import annotations

import importlib.util
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JARS_WHEEL = "bodo-iceberg-connector==2026.10"
AWS_SDK_VERSION = "2.29.26"
# SDK modules S3FileIO loads (kms: S3 server-side encryption types; sts: the default chain).
_UNNEEDED_SDK_MODULES = {"dynamodb", "glue", "s3tables", "netty-nio-client"}
_OTHER_JARS = (
    "iceberg-aws-1.5.2.jar",
    "reactive-streams-1.0.4.jar",
    "eventstream-1.0.1.jar",
    # S3A (Hadoop's s3:// file system) for the files Spark reads by path: hadoop-aws and
    # the AWS SDK v1 it is built on.
    "hadoop-aws-3.3.3.jar",
    "aws-java-sdk-core-1.12.382.jar",
    "aws-java-sdk-s3-1.12.382.jar",
    "aws-java-sdk-kms-1.12.382.jar",
    "aws-java-sdk-sts-1.12.382.jar",
    "aws-java-sdk-dynamodb-1.12.382.jar",
    "jmespath-java-1.12.382.jar",
    "ion-java-1.0.2.jar",
)
REGION = "us-east-1"
# Values of the `storage_kind` fixture (tests/conftest.py).
STORAGE_KINDS = ["local", "s3"]


def s3_test_jars() -> list[str]:
    """iceberg-aws + AWS SDK v2 (S3FileIO) and hadoop-aws + SDK v1 (S3A), from the installed
    test wheel; [] if it is absent."""
    # Located, not imported: the package itself needs modules icemv does not install.
    spec = importlib.util.find_spec("bodo_iceberg_connector")
    if spec is None or not spec.submodule_search_locations:
        return []
    libs = Path(next(iter(spec.submodule_search_locations))) / "jars" / "libs"
    suffix = f"-{AWS_SDK_VERSION}.jar"
    sdk = [
        path
        for path in libs.glob(f"*{suffix}")
        if path.name[: -len(suffix)] not in _UNNEEDED_SDK_MODULES
    ]
    others = [libs / name for name in _OTHER_JARS]
    if not sdk or not all(path.exists() for path in others):
        return []
    return sorted(str(path) for path in [*others, *sdk])


@dataclass(frozen=True)
class S3Server:
    """A running moto S3 endpoint; any access key pair is accepted."""

    endpoint: str
    access_key_id: str = "icemv-test-key"
    secret_access_key: str = "icemv-test-secret"  # moto checks no credentials

    def create_bucket(self) -> str:
        name = f"icemv-{uuid.uuid4().hex[:10]}"
        self.client().create_bucket(Bucket=name)
        return name

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )

    def object_keys(self, bucket: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def warehouse(self, bucket: str, prefix: str = "warehouse") -> dict[str, Any]:
        """A `warehouse` config section on this server, shared by Spark and pyiceberg."""
        return {
            "location": f"s3://{bucket}/{prefix}",
            "properties": {
                "s3.endpoint": self.endpoint,
                "s3.path-style-access": "true",
                "client.region": REGION,
                "s3.access-key-id": self.access_key_id,
                "s3.secret-access-key": self.secret_access_key,
            },
        }


def start_moto() -> tuple[S3Server, Any]:
    """Start moto's threaded server on an ephemeral local port; returns (server, handle)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    handle = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    handle.start()
    host, port = handle.get_host_and_port()
    return S3Server(f"http://{host}:{port}"), handle


if __name__ == "__main__":  # `make image-test`: the jars, space-separated, for JARS
    print(" ".join(s3_test_jars()))
