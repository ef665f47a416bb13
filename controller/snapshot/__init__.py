"""What a pass knows of the cluster: frozen records and the parsers that make them. Pure."""
