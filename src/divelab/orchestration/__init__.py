"""divelab.orchestration: systems of this theme (see divelab.registry)."""
