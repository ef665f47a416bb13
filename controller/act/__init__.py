"""Carries a Plan out: the only writer to the API server, and the metrics of what it did."""
