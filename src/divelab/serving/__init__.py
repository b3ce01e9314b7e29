"""divelab.serving: systems of this theme (see divelab.registry)."""
