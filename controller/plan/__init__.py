"""One pass's decisions: ``plan(snapshot, settings, now, memory) -> Plan``, typed actions. Pure."""
