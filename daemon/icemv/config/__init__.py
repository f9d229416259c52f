"""The one typed configuration of icemv: the model (`model`) and how it is loaded (`loading`)."""

from icemv.config.loading import load_config, mask_url, masked_dump, parse_config
from icemv.config.model import (
    CatalogConfig,
    Config,
    KafkaConfig,
    LoggingConfig,
    MaintenanceConfig,
    MaterializedViewSpec,
    MetricsConfig,
    PollingConfig,
    RefreshConfig,
    SparkConfig,
    WarehouseConfig,
)

__all__ = [
    "CatalogConfig",
    "Config",
    "KafkaConfig",
    "LoggingConfig",
    "MaintenanceConfig",
    "MaterializedViewSpec",
    "MetricsConfig",
    "PollingConfig",
    "RefreshConfig",
    "SparkConfig",
    "WarehouseConfig",
    "load_config",
    "mask_url",
    "masked_dump",
    "parse_config",
]
