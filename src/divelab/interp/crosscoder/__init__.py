"""Localizing RL-Induced Tool Use to a Single Crosscoder Feature (arXiv 2606.26474, E175).

A Dedicated Feature Crosscoder (DFC) trained jointly on a base model and its RL tool-use sibling splits its
dictionary into A-exclusive, B-exclusive and shared features, with forbidden weights exactly zero. RL-introduced
tool calling concentrates in a few A-exclusive features: steering one of them raises tool correctness, and merely
routing activations through the dictionary already raises it, while the base picks up tool selection but not syntax.

>>> from divelab.interp.crosscoder import harvest_pairs, train_crosscoder, CrosscoderConfig  # doctest: +SKIP
>>> acts_a, acts_b = harvest_pairs(sibling, base, tok, texts, layer=6)
>>> cc = train_crosscoder(acts_a, acts_b, CrosscoderConfig(dict_size=1024, k=32, excl_share=0.05))
>>> ranked = rank_features(cc, acts_a, acts_b, labels, partition="A")
"""

from divelab.interp.crosscoder.dfc import Crosscoder, CrosscoderConfig, reconstruction_mse, train_crosscoder
from divelab.interp.crosscoder.harvest import (
                                                     check_pair,
                                                     decoder_layers,
                                                     harvest_generation_pairs,
                                                     harvest_pairs,
                                                     layer_hook,
                                                     load_shards,
)
from divelab.interp.crosscoder.interventions import (
                                                     ablate_features,
                                                     add_direction,
                                                     generate,
                                                     prescale_topk,
                                                     recon_patch,
                                                     steer_features,
)
from divelab.interp.crosscoder.ranking import cohens_d, latent_scaling, rank_features, relative_decoder_norm

__all__ = ["Crosscoder", "CrosscoderConfig", "ablate_features", "add_direction", "check_pair", "cohens_d",
           "decoder_layers", "generate", "harvest_generation_pairs", "harvest_pairs", "latent_scaling", "layer_hook",
           "load_shards", "prescale_topk", "rank_features", "recon_patch", "reconstruction_mse", "relative_decoder_norm",
           "steer_features", "train_crosscoder"]
