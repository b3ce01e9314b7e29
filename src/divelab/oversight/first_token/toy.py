"""The reproduction model: a tiny divelab Llama trained from scratch on the synthetic safety traces.

The model and its word-level tokenizer are saved as an ordinary Hugging Face checkpoint directory in the
divelab cache (keyed by the recipe), and loaded back through :func:`divelab.lm.load_model`, the same
path a user's checkpoint takes. The SFT "defence" fine-tunes a copy on a mix of the original traces and
off-policy refusal traces.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from divelab.cache import atomic_dir, entry_path, stable_hash
from divelab.oversight.first_token.synthetic import VOCAB, Example, GenConfig, make_dataset
from divelab.threads import torch_threads

RECIPE_VERSION = 1


def toy_tokenizer() -> Any:
    """A word-level ``PreTrainedTokenizerFast`` over the synthetic vocabulary (whitespace split)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>")


@dataclass(frozen=True)
class ToyRecipe:
    """The toy reasoning model: the generator of its training traces and its training."""

    gen: GenConfig = field(default_factory=GenConfig)
    """the trace generator (its planted regimes)"""
    n_train: int = 20000
    """generated training traces"""
    steps: int = 800
    """optimiser steps"""
    batch_size: int = 64
    """traces per step"""
    lr: float = 3e-3
    """learning rate"""
    hidden_size: int = 64
    """the model's hidden size (its MLP is 3x wider)"""
    layers: int = 3
    """transformer layers"""
    heads: int = 4
    """attention heads"""
    seed: int = 0
    """seed of the model's initialisation, its data and its training"""

    def key(self) -> str:
        return stable_hash({"v": RECIPE_VERSION, **asdict(self)})


@dataclass(frozen=True)
class DefenceRecipe:
    """Off-policy SFT defence: fine-tune on the original mix plus refusal traces written by the generator
    (decision refuse, refuse-ish stance throughout) for prompts with harm >= ``harm_min``."""

    refusal_share: float = 0.3
    """share of the fine-tuning traces that are refusal traces"""
    harm_min: float = -2.0
    """the refusal traces' prompts have harm at least this"""
    n_train: int = 6000
    """fine-tuning traces in all"""
    steps: int = 200
    """optimiser steps"""
    batch_size: int = 64
    """traces per step"""
    lr: float = 1e-3
    """learning rate"""

    def __post_init__(self) -> None:
        if not 0.0 < self.refusal_share < 1.0:
            raise ValueError(f"refusal_share must be in (0, 1), got {self.refusal_share}")


def encode_examples(tok: Any, examples: list[Example]) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids and loss masks (the prompt is not trained on)."""
    seqs, masks = [], []
    for ex in examples:
        ids = tok(ex.text(), add_special_tokens=False)["input_ids"]
        n_prompt = len(ex.prompt_words)
        seqs.append(ids)
        masks.append([0] * n_prompt + [1] * (len(ids) - n_prompt))
    return seqs, masks


def _fit(model: Any, tok: Any, examples: list[Example], steps: int, batch: int, lr: float, seed: int,
         desc: str) -> None:
    from divelab.lm.train import SequenceSource, TrainConfig, train

    seqs, masks = encode_examples(tok, examples)
    src = SequenceSource(seqs, pad_token_id=tok.pad_token_id, loss_masks=masks)
    cfg = TrainConfig(steps=steps, batch_size=batch, seq_len=max(len(s) for s in seqs), lr=lr,
                      warmup=min(50, steps // 10), eval_every=0, eval_batches=1, seed=seed, weight_decay=0.01)
    train(model, src, None, cfg, description=desc)


def _save(model: Any, tok: Any, path: Path) -> None:
    with atomic_dir(path) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)


def trained_toy(recipe: ToyRecipe | None = None) -> tuple[Any, Any, Path]:
    """(model, tokenizer, checkpoint dir) of the reproduction model; trained once, then loaded."""
    from divelab.lm import load_model
    from divelab.lm.models import build_model

    recipe = recipe or ToyRecipe()
    path = entry_path("first-token-toy", recipe.key())
    if not (path / "config.json").exists():
        tok = toy_tokenizer()
        with torch_threads(1):
            model = build_model("tiny-100k", vocab_size=len(VOCAB), seed=recipe.seed, hidden_size=recipe.hidden_size,
                                num_hidden_layers=recipe.layers, num_attention_heads=recipe.heads,
                                intermediate_size=3 * recipe.hidden_size, max_position_embeddings=64)
            model.config.pad_token_id, model.config.eos_token_id = tok.pad_token_id, tok.eos_token_id
            model.config.bos_token_id = tok.bos_token_id
            data = make_dataset(recipe.n_train, recipe.seed, recipe.gen)
            _fit(model, tok, data, recipe.steps, recipe.batch_size, recipe.lr, recipe.seed, "first-token toy model")
        _save(model, tok, path)
    model, tok = load_model(path)
    return model, tok, path


def defended_toy(recipe: ToyRecipe, defence: DefenceRecipe) -> tuple[Any, Any, Path]:
    """The reproduction model after the off-policy refusal SFT defence (cached like the base)."""
    from divelab.lm import load_model

    path = entry_path("first-token-toy", stable_hash({"base": recipe.key(), "defence": asdict(defence)}))
    if not (path / "config.json").exists():
        model, tok, _ = trained_toy(recipe)
        n_ref = int(defence.n_train * defence.refusal_share)
        seed = recipe.seed + 5000
        orig = make_dataset(defence.n_train - n_ref, seed, recipe.gen)
        ref = make_dataset(n_ref, seed + 1, recipe.gen, regimes=("fast",), force_refuse=True,
                           harm_min=defence.harm_min)
        mix = [x for pair in zip(orig, ref, strict=False) for x in pair] + orig[len(ref):]
        with torch_threads(1):
            model.train()
            _fit(model, tok, mix, defence.steps, defence.batch_size, defence.lr, seed, "SFT refusal defence")
        _save(model, tok, path)
    model, tok = load_model(path)
    return model, tok, path
