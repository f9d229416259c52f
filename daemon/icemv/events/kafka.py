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
