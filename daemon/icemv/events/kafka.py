"""kafka-python settings shared by every client icemv makes (consumer, publisher, dead letters)."""

from __future__ import annotations

from typing import Any

from icemv.config import KafkaConfig


def kafka_client_kwargs(config: KafkaConfig) -> dict[str, Any]:
    """kafka-python keyword arguments for connection and security, for producers and consumers.

    The result holds the SASL password in clear text: pass it to the client, never log it.
    """
    if not config.bootstrap_servers:
        raise ValueError("kafka.bootstrap_servers is empty")
    kwargs: dict[str, Any] = {
        "bootstrap_servers": list(config.bootstrap_servers),
        "security_protocol": config.security_protocol,
    }
    optional = {
        "sasl_mechanism": config.sasl_mechanism,
        "sasl_plain_username": config.sasl_username,
        "sasl_plain_password": (
            config.sasl_password.get_secret_value() if config.sasl_password else None
        ),
        "ssl_cafile": config.ssl_cafile,
        "ssl_certfile": config.ssl_certfile,
        "ssl_keyfile": config.ssl_keyfile,
    }
    kwargs.update({name: value for name, value in optional.items() if value is not None})
    return kwargs


def acked_producer(config: KafkaConfig, timeout_seconds: float, **extra: Any) -> Any:
    """A producer for records that must not be lost: every in-sync replica acknowledges,
    nothing lingers, and every wait (bootstrap, metadata, send, delivery) gives up after
    `timeout_seconds` instead of blocking the caller."""
    from kafka import KafkaProducer

    timeout_ms = int(timeout_seconds * 1000)
    return KafkaProducer(
        **kafka_client_kwargs(config),
        acks="all",
        # Producer ids do not survive a broker that loses its state (Tansu's memory storage).
        enable_idempotence=False,
        bootstrap_timeout_ms=timeout_ms,
        max_block_ms=timeout_ms,
        request_timeout_ms=timeout_ms,
        delivery_timeout_ms=timeout_ms,
        linger_ms=0,
        **extra,
    )
