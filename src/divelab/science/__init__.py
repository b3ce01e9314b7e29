"""divelab.science: systems of this theme (see divelab.registry)."""
