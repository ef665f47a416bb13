"""The demo: the scenario of two teams' workloads, one compaction run over it, its measures.

``python -m localcluster.demo`` (``make demo``) runs it; ``observe`` and ``dashboard`` draw
the Grafana picture of the same run. ``scenario``, ``compaction_run`` and ``measure`` are
also the workload the end-to-end tests and the compaction benchmarks use.
"""
