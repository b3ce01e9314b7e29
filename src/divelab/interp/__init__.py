"""divelab.interp: systems of this theme (see divelab.registry)."""
