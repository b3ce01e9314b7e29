"""divelab.lm: tiny language models trained offline on CPython's stdlib, and helpers for any HF causal LM."""
