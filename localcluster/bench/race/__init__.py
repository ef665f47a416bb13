"""The race beside Karpenter (`make bench-peers`, part two): one protection contract, paired
starts, each contender as its users run it, figures over a fixed horizon, paired statistics."""
