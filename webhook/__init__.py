"""The Pod mutating admission webhook: resolve the owner's intent, answer with a JSONPatch.

Hot path, fail-open: anything unexpected ends in ``allowed: true`` with no patch.
"""
