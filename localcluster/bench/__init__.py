"""End-to-end benchmarks on the embedded cluster: ``python -m localcluster.bench.e2e``
(``make bench-e2e``) and ``python -m localcluster.bench.compaction_scale``.

They stay here rather than in ``loadtest/``: they run the demo's scenario and compaction run
(``localcluster.demo``) on the embedded cluster and judge the whole stack, where ``loadtest``
drives the webhook and controller with synthetic load and never imports the demo. They never
import chaos.
"""
