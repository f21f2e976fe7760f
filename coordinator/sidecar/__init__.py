"""Sidecar mode: the coordinator in front of an existing Kafka-compatible cluster (`sidecar.Sidecar`).

Nothing is imported here: `coordinator.config` reads `settings.SidecarConfig` while the registry is
being built, before the rest of the package can be imported."""
