"""The compaction controller: reconcilers, scheduler and descheduler rendering (issue 5)."""
