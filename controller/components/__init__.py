"""Manifests of the Pods Compactor runs: the compaction scheduler, each policy's descheduler.
Pure."""
