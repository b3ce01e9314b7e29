"""Interventions through a crosscoder at generation time: reconstruction patch, targeted post-top-k steering,
uniform pre-top-k scaling (a no-op on the top-k set), feature ablation, steering along a decoder direction, and
the difference-of-means baseline. Each is an ``Edit`` on one model's residual stream; the other model runs in
lockstep on the same tokens so the crosscoder encodes both activations, as in training."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from divelab.interp.crosscoder.dfc import Crosscoder
from divelab.interp.crosscoder.harvest import forward, layer_hook, left_pad

# edit(x_self, x_other) -> new x_self, over [rows, positions, d]
PairEdit = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]


def _enc(cc: Crosscoder, side: int, x: torch.Tensor, other: torch.Tensor | None) -> torch.Tensor:
    return cc.encode(x, other) if side == 0 else cc.encode(other, x)


def recon_patch(cc: Crosscoder, side: int) -> PairEdit:
    """Replace the activation by the crosscoder's reconstruction x̂_side."""
    return lambda x, o: cc.decode(_enc(cc, side, x, o), side)


def steer_features(cc: Crosscoder, side: int, features: Sequence[int], alpha: float) -> PairEdit:
    """Post-top-k targeted steering: x + Σ_{i∈S} (α − 1)·f_i·W_dec[i, side] (α = 1 no-op, α = 0 ablation)."""
    idx = torch.tensor(list(features), dtype=torch.long)

    def edit(x: torch.Tensor, o: torch.Tensor | None) -> torch.Tensor:
        f = _enc(cc, side, x, o)[..., idx]
        dirs = torch.stack([cc.direction(int(i), side) for i in idx])  # [S, d]
        return x + (alpha - 1.0) * f @ dirs

    return edit


def ablate_features(cc: Crosscoder, side: int, features: Sequence[int]) -> PairEdit:
    return steer_features(cc, side, features, 0.0)


def random_unit(d: int, seed: int) -> torch.Tensor:
    """A fixed random unit vector of width ``d`` (the direction of the matched-norm negative controls)."""
    v = torch.randn(d, generator=torch.Generator().manual_seed(seed))
    return v / v.norm()


def steer_random_direction(cc: Crosscoder, side: int, features: Sequence[int], alpha: float, seed: int) -> PairEdit:
    """The negative control of :func:`steer_features`: the same edit's size at every position, along a fixed random
    direction instead of the features' decoder directions, x + ‖(α − 1)·Σ f_i·W_dec[i, side]‖·r (α = 0: the
    control of an ablation)."""
    real = steer_features(cc, side, features, alpha)

    def edit(x: torch.Tensor, o: torch.Tensor | None) -> torch.Tensor:
        r = random_unit(x.shape[-1], seed).to(x.dtype)
        return x + (real(x, o) - x).norm(dim=-1, keepdim=True) * r

    return edit


def recon_random_direction(cc: Crosscoder, side: int, seed: int) -> PairEdit:
    """The negative control of :func:`recon_patch`: x moved by the reconstruction error's norm ‖x̂ − x‖ along a
    fixed random direction (a perturbation of the patch's size that carries none of the dictionary)."""
    real = recon_patch(cc, side)

    def edit(x: torch.Tensor, o: torch.Tensor | None) -> torch.Tensor:
        r = random_unit(x.shape[-1], seed).to(x.dtype)
        return x + (real(x, o) - x).norm(dim=-1, keepdim=True) * r

    return edit


def add_direction(vector: torch.Tensor) -> PairEdit:
    """x + vector at every edited position (steering a model along a fixed direction)."""
    return lambda x, o: x + vector


@torch.no_grad()
def prescale_topk(cc: Crosscoder, xa: torch.Tensor | None, xb: torch.Tensor | None, alpha: float,
                  features: slice | None = None) -> torch.Tensor:
    """Top-k indices after scaling pre-activations by ``alpha`` (all of them by default). Uniform scaling by
    α > 0 cannot change which k are largest, so the selected set is exactly the unscaled one."""
    pre = cc.pre_acts(xa, xb).clone()
    pre[..., features if features is not None else slice(None)] *= alpha
    return pre.topk(cc.config.k, dim=-1).indices.sort(-1).values


@torch.no_grad()
def generate(model: torch.nn.Module, tok, texts: Sequence[str], *, layer: int | None = None,
             edit: PairEdit | None = None, other: torch.nn.Module | None = None, max_new_tokens: int = 16,
             temperature: float = 0.0, seed: int = 0, batch_size: int = 128) -> list[str]:
    """Greedy (or sampled) continuations; with ``edit`` the residual after ``layer`` is rewritten at the last
    prompt token and every generated token, with ``other`` (if given) run in lockstep to supply its activations."""
    out: list[str] = []
    g = torch.Generator().manual_seed(seed)
    eos = tok.eos_token_id
    for s in range(0, len(texts), batch_size):
        ids, mask = left_pad(tok, texts[s:s + batch_size])
        start = ids.shape[1] - 1
        done = torch.zeros(ids.shape[0], dtype=torch.bool)
        past, pos = None, (mask.cumsum(-1) - 1).clamp(min=0)
        for _ in range(max_new_tokens):
            if edit is None:
                # no edit: reuse the key/value cache and feed only the newest token (the same logits as a full
                # forward, a fraction of the work); an edit recomputes everything, with the other model alongside
                feed = ids if past is None else ids[:, -1:]
                step = model(input_ids=feed, attention_mask=mask, position_ids=pos[:, -feed.shape[1]:],
                             cache=past, use_cache=True)
                logits, past = step.logits, step.cache
            else:
                o = None
                if other is not None:
                    cap: list[torch.Tensor] = []
                    with layer_hook(other, layer, capture=cap):
                        forward(other, ids, mask)
                    o = cap[0][:, start:]
                with layer_hook(model, layer, edit=lambda x, o=o: edit(x, o), start=start):
                    logits = forward(model, ids, mask)
            last = logits[:, -1].float()
            if temperature > 0:
                nxt = torch.multinomial(torch.softmax(last / temperature, -1), 1, generator=g)[:, 0]
            else:
                nxt = last.argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, tok.pad_token_id), nxt)
            done |= nxt == eos
            ids = torch.cat([ids, nxt[:, None]], 1)
            mask = torch.cat([mask, (~done | (nxt == eos)).long()[:, None]], 1)
            pos = torch.cat([pos, pos[:, -1:] + 1], 1)
            if bool(done.all()):
                break
        gen = ids[:, -(ids.shape[1] - start - 1):] if ids.shape[1] > start + 1 else ids[:, :0]
        for row in gen.tolist():
            row = row[:row.index(eos)] if eos in row else row
            out.append(tok.decode([t for t in row if t != tok.pad_token_id]))
    return out
