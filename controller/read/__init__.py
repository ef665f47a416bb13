"""Fills one pass's Snapshot, from the watch caches or from API pages."""
