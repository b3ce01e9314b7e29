"""divelab.training: systems of this theme (see divelab.registry)."""
