"""divelab.coding: systems of this theme (see divelab.registry)."""
