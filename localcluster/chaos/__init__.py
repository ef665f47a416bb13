"""Chaos: faults injected one at a time while the whole stack works, hostile clients, and the
audit-log timelines that judge what the cluster went through.

``python -m localcluster.chaos`` (``make chaos``) runs every fault; ``harness`` holds the
stack under test, ``faults`` the faults, ``reliability`` the limits each run is judged
against. It builds on the embedded cluster only, never on the benchmarks.
"""
