"""divelab.oversight: systems of this theme (see divelab.registry)."""
