"""The compaction controller, laid out as one pass runs: ``read`` fills a ``snapshot``, ``plan``
decides with pure code (on the ``drain_planner`` and the ``components`` it renders), ``act``
carries the plan out through ``kubeapi``; ``process`` runs the passes."""
