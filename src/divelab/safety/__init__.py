"""divelab.safety: systems of this theme (see divelab.registry)."""
