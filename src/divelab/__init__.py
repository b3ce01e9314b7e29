"""divelab: the eighteen systems of "AI Papers Week in Review: June 22-28, 2026", as components
you can use on real models and reproductions that measure the papers' claims."""

__version__ = "0.1.0"
