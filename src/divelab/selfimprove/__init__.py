"""divelab.selfimprove: systems of this theme (see divelab.registry)."""
