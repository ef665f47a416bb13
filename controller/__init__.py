"""The compaction controller: each pass reads a snapshot (``reader``), decides with pure code
(``plan``) and carries the plan out (``executor``); ``manager`` runs the passes."""
