"""Which nodes to empty, one drain plan for every policy, on a simulated cluster. Pure."""
