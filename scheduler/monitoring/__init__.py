"""Monitoring: the fleet exporter (``fleetsched exporter``) and the metric names it serves.

- ``scheduler.monitoring.fleet``: :class:`FleetCollector`, the gauges read per scrape;
- ``scheduler.monitoring.exporter``: the HTTP server process around it.

A worker node's own metrics are counted in the node (``workers.metrics``).
"""

from scheduler.monitoring.exporter import DEFAULT_ADDRESS, DEFAULT_PORT, registry_for, serve
from scheduler.monitoring.fleet import METRICS, FleetCollector, exported_names

__all__ = ["DEFAULT_ADDRESS", "DEFAULT_PORT", "METRICS", "FleetCollector", "exported_names",
           "registry_for", "serve"]
