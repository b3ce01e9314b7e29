"""Drafters that read the target's hidden states and share its frozen embedding and LM head.

One module covers the four drafters of the paper's comparison:

* ``parallel`` — DFlash-style backbone: the block's γ slots (anchor = slot 1, then γ−1 mask
  tokens) attend bidirectionally to each other and to the target's fused hidden states of the
  last ``window`` committed positions (injected as extra keys/values, "KV injection"); all γ
  draft distributions come out of one pass.
* ``markov`` — the parallel backbone + DSpark's Markov sequential head: a low-rank bias
  ``W1[x_{k−1}] W2`` from the previously drafted token, sampled left to right.
* ``rnn`` — the parallel backbone + a gated RNN head over [state; W1[x_{k−1}]; h_k].
* ``ar`` — EAGLE-style autoregressive baseline: one causal layer over the same injected target
  features; γ sequential passes, each fed the previous draft token. (Simplification of EAGLE-3:
  it feeds back tokens, not its own hidden states, so no training-time test is needed.)

Every drafter has a confidence head ``c_k = σ(wᵀ[h_k; W1[x_{k−1}]])`` (the Markov feature only
when a sequential head exists), predicting that draft k survives given drafts < k survived.
Per-token draft probabilities are exact softmaxes, as lossless rejection sampling needs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from divelab.serving.dspark.identity import target_identity

DRAFTER_KINDS = ("parallel", "markov", "rnn", "ar")


@dataclass
class DrafterConfig:
    kind: str = "markov"
    gamma: int = 8
    n_layers: int = 2
    rank: int = 32  # r of the Markov/RNN head
    window: int = 16  # committed positions of target features the drafter attends to
    n_heads: int = 4
    ffn_mult: int = 2
    target_layers: tuple[int, ...] = ()  # indices into HF hidden_states; () = auto
    vocab_size: int = 0  # filled from the target
    hidden_size: int = 0  # filled from the target
    target_name: str = ""
    # > 0: the draft head scores only this many target tokens (the most frequent in the training data,
    # set by Drafter.set_draft_vocab): on a CPU the head over a 49k vocabulary costs about a fifth of a
    # target forward per drafted token. Exactness is the verifier's: a token outside the set has draft
    # probability 0, so rejection sampling resamples it from the residual; greedy output is unchanged.
    draft_vocab: int = 0

    def __post_init__(self) -> None:
        if self.kind not in DRAFTER_KINDS:
            raise ValueError(f"unknown drafter kind {self.kind!r}; allowed: {', '.join(DRAFTER_KINDS)}")
        if self.gamma < 1:
            raise ValueError(f"gamma (draft block length) must be >= 1, got {self.gamma}")
        if self.n_layers < 1 or self.window < 1:
            raise ValueError("n_layers and window must be >= 1")
        if self.kind in ("markov", "rnn") and self.rank < 1:
            raise ValueError(f"the {self.kind} head needs rank >= 1, got {self.rank}")
        if self.draft_vocab < 0 or (self.vocab_size and self.draft_vocab > self.vocab_size):
            raise ValueError(f"draft_vocab must be 0 (the whole vocabulary) or 1..{self.vocab_size or 'vocab_size'}, "
                             f"got {self.draft_vocab}")
        self.target_layers = tuple(int(i) for i in self.target_layers)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["target_layers"] = list(self.target_layers)
        return d


def default_target_layers(n_layers: int) -> tuple[int, ...]:
    """Low, middle and last layers (HF ``hidden_states`` indices; index n is the normed output)."""
    return tuple(sorted({1, max(1, n_layers // 2), n_layers}))


def _rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding; x (..., T, D), pos (T,) or (N, T)."""
    d = x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    ang = pos.to(torch.float32)[..., None] * inv  # (..., T, D/2)
    if ang.dim() == 3:
        ang = ang[:, None]  # broadcast over heads
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class DraftLayer(nn.Module):
    """Pre-norm attention (queries from the block; keys/values from [context; block]) + MLP.

    The context keys/values are projected once per committed position (:meth:`project_ctx`,
    un-rotated) and cached by the engine; RoPE is applied to the window slots at use time, because a
    slot's content slides as the window moves but its position (0..w−1) does not."""

    def __init__(self, d: int, n_heads: int, ffn_mult: int) -> None:
        super().__init__()
        if d % n_heads:
            raise ValueError(f"drafter hidden size {d} not divisible by n_heads {n_heads}")
        self.h, self.dh = n_heads, d // n_heads
        self.norm1, self.norm2, self.norm_ctx = nn.RMSNorm(d), nn.RMSNorm(d), nn.RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.mlp = nn.Sequential(nn.Linear(d, ffn_mult * d, bias=False), nn.SiLU(), nn.Linear(ffn_mult * d, d, bias=False))

    def project_ctx(self, ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Un-rotated context keys and values (N, W, d) of fused target features (N, W, d)."""
        hc = self.norm_ctx(ctx)
        return self.k(hc), self.v(hc)

    def _heads(self, z: torch.Tensor) -> torch.Tensor:
        return z.view(z.shape[0], z.shape[1], self.h, self.dh).transpose(1, 2)

    def forward(self, x: torch.Tensor, ctx_kv: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor,
                pos: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x (N, T, d) block slots at positions ``pos`` (T,); ``past``: rotated keys/values of earlier
        block slots (the AR drafter's KV cache). Returns the new x and the block's keys/values."""
        n, t, d = x.shape
        ck, cv = ctx_kv
        w = ck.shape[1]
        hx = self.norm1(x)
        q = _rope(self._heads(self.q(hx)), pos)
        kx, vx = _rope(self._heads(self.k(hx)), pos), self._heads(self.v(hx))
        if past is not None:
            kx, vx = torch.cat([past[0], kx], 2), torch.cat([past[1], vx], 2)
        k = torch.cat([_rope(self._heads(ck), torch.arange(w, device=x.device)), kx], 2)
        v = torch.cat([self._heads(cv), vx], 2)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
        x = x + self.o(att.transpose(1, 2).reshape(n, t, d))
        return x + self.mlp(self.norm2(x)), (kx, vx)


@dataclass
class DraftOutput:
    tokens: torch.Tensor  # (R, γ) drafted tokens
    probs: torch.Tensor | None  # (R, γ, V) exact draft distributions (None when greedy)
    conf_logits: torch.Tensor  # (R, γ) raw confidence logits
    timings: dict = field(default_factory=dict)


class Drafter(nn.Module):
    """A draft model bound to one target (its embedding, LM head and hidden-state layout)."""

    # what the Markov head conditions on while drafting: the previously drafted token ("drafted", DSpark), or the
    # block's anchor token at every slot ("anchor": the negative control of :func:`anchor_head_sham`). A class
    # attribute, so saved drafters and their state dicts are unchanged.
    head_input: str = "drafted"

    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        if config.vocab_size < 2 or config.hidden_size < 1:
            raise ValueError("DrafterConfig needs vocab_size and hidden_size (use Drafter.for_target)")
        if not 0 <= config.draft_vocab <= config.vocab_size:
            raise ValueError(f"draft_vocab must be 0 (the whole vocabulary) or 1..{config.vocab_size}, "
                             f"got {config.draft_vocab}")
        self.config = c = config
        d, m = c.hidden_size, len(c.target_layers)
        if m == 0:
            raise ValueError("DrafterConfig.target_layers is empty (use Drafter.for_target)")
        self.fuse = nn.Linear(m * d, d, bias=False)
        self.fuse_norm = nn.RMSNorm(d)
        self.mask_embed = nn.Parameter(torch.randn(d) * 0.02)
        self.layers = nn.ModuleList(DraftLayer(d, c.n_heads, c.ffn_mult) for _ in range(c.n_layers))
        self.out_norm = nn.RMSNorm(d)
        seq = c.kind in ("markov", "rnn")
        k = c.draft_vocab or c.vocab_size
        # the draft vocabulary (ids into the target's); the identity when the head scores everything
        self.register_buffer("vocab_ids", torch.arange(k, dtype=torch.long))
        if seq:
            self.w1 = nn.Embedding(c.vocab_size, c.rank)
            nn.init.normal_(self.w1.weight, std=0.02)
            self.w2 = nn.Linear(c.rank, k, bias=False)
            nn.init.zeros_(self.w2.weight)  # start as the pure backbone
        if c.kind == "rnn":
            self.rnn = nn.Linear(2 * c.rank + d, 3 * c.rank)
        self.conf_head = nn.Linear(d + (c.rank if seq else 0), 1)
        self._target: dict = {}
        self._head_rows: torch.Tensor | None = None

    # ----------------------------------------------------------------------------------------
    @classmethod
    def for_target(cls, target: nn.Module, config: DrafterConfig | None = None, **kwargs: object) -> Drafter:
        config = config or DrafterConfig(**kwargs)  # type: ignore[arg-type]
        tc = target.config
        n_layers = int(tc.num_hidden_layers)
        config.vocab_size = int(tc.vocab_size)
        config.hidden_size = int(tc.hidden_size)
        if not config.target_layers:
            config.target_layers = default_target_layers(n_layers)
        bad = [i for i in config.target_layers if not 0 <= i <= n_layers]
        if bad:
            raise ValueError(f"target_layers {bad} out of range: the target has hidden_states 0..{n_layers}")
        d = cls(config)
        d.attach(target)
        return d

    def attach(self, target: nn.Module) -> Drafter:
        """Bind the frozen target embedding and LM head (shared, not copied, not trained)."""
        tc = target.config
        if int(tc.vocab_size) != self.config.vocab_size:
            raise ValueError(f"drafter does not match the target: drafter vocab_size {self.config.vocab_size}, "
                             f"target vocab_size {tc.vocab_size}")
        if int(tc.hidden_size) != self.config.hidden_size:
            raise ValueError(f"drafter does not match the target: drafter hidden_size {self.config.hidden_size}, "
                             f"target hidden_size {tc.hidden_size}")
        if max(self.config.target_layers) > int(tc.num_hidden_layers):
            raise ValueError(f"drafter reads target layer {max(self.config.target_layers)} but the target has "
                             f"{tc.num_hidden_layers} layers")
        self._target = {"embed": target.get_input_embeddings(), "head": target.get_output_embeddings()}
        self._head_rows = None
        self.target_identity = target_identity(target)  # written beside the drafter by save_drafter
        return self

    @property
    def reduced(self) -> bool:
        return 0 < self.config.draft_vocab < self.config.vocab_size

    def set_draft_vocab(self, token_ids: torch.Tensor | list[int]) -> Drafter:
        """Score only ``token_ids`` (``config.draft_vocab`` distinct ids of the target's vocabulary)."""
        ids = torch.as_tensor(token_ids, dtype=torch.long).flatten()
        if len(ids) != self.config.draft_vocab or len(torch.unique(ids)) != len(ids):
            raise ValueError(f"need {self.config.draft_vocab} distinct token ids for the draft vocabulary, got "
                             f"{len(ids)} ({len(torch.unique(ids))} distinct)")
        if int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size:
            raise ValueError(f"draft vocabulary ids must lie in 0..{self.config.vocab_size - 1}")
        self.vocab_ids.copy_(ids.to(self.vocab_ids.device))
        self._head_rows = None
        return self

    def draft_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Logits over the draft vocabulary (the target's whole vocabulary unless reduced)."""
        if not self.reduced:
            return self.lm_head(h)
        head = self._target["head"]
        if self._head_rows is None or self._head_rows.device != h.device:
            # the frozen target head's rows of the draft vocabulary, sliced once (not trained)
            self._head_rows = head.weight.detach()[self.vocab_ids.to(head.weight.device)].to(h.device)
        out = h @ self._head_rows.t()
        if getattr(head, "bias", None) is not None:
            out = out + head.bias.detach()[self.vocab_ids]
        return out

    def to_target_ids(self, idx: torch.Tensor) -> torch.Tensor:
        """Target token ids of draft-vocabulary indices."""
        return self.vocab_ids[idx] if self.reduced else idx

    def to_draft_index(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(index into the draft vocabulary, whether the token is in it) for target token ids."""
        if not self.reduced:
            return tokens, torch.ones_like(tokens, dtype=torch.bool)
        lookup = torch.full((self.config.vocab_size,), -1, dtype=torch.long, device=tokens.device)
        lookup[self.vocab_ids.to(tokens.device)] = torch.arange(len(self.vocab_ids), device=tokens.device)
        idx = lookup[tokens]
        return idx.clamp(min=0), idx >= 0

    def full_probs(self, probs: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary probabilities placed in the target's vocabulary (0 elsewhere)."""
        if not self.reduced:
            return probs
        out = probs.new_zeros(*probs.shape[:-1], self.config.vocab_size)
        return out.index_copy_(-1, self.vocab_ids.to(probs.device), probs)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self._target["embed"](ids)

    def lm_head(self, h: torch.Tensor) -> torch.Tensor:
        return self._target["head"](h)

    def fuse_features(self, hidden_states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Fuse the selected target layers' hidden states: RMSNorm(W_c [H^l1; ...; H^lm])."""
        return self.fuse_concat(torch.cat([hidden_states[i] for i in self.config.target_layers], dim=-1))

    def fuse_concat(self, feats: torch.Tensor) -> torch.Tensor:
        """Fuse already concatenated target features [H^l1; ...; H^lm] (e.g. cached ones)."""
        return self.fuse_norm(self.fuse(feats.to(self.fuse.weight.dtype)))

    # ----------------------------------------------------------------------------------------
    def _mask(self, ctx_mask: torch.Tensor, t: int) -> torch.Tensor:
        n, w = ctx_mask.shape
        block = torch.ones(t, t, dtype=torch.bool, device=ctx_mask.device)
        if self.config.kind == "ar":
            block = torch.tril(block)
        return torch.cat([ctx_mask[:, None, :].expand(n, t, w), block.expand(n, t, t)], dim=2)

    def project_context(self, ctx: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per-layer un-rotated context keys/values of fused features ``ctx`` (N, W, d): what the
        engine caches per request so each step projects only the newly committed positions."""
        return [layer.project_ctx(ctx) for layer in self.layers]

    def backbone(self, ctx: torch.Tensor | None, ctx_mask: torch.Tensor, inputs: torch.Tensor,
                 ctx_kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> torch.Tensor:
        """Hidden states h (N, T, d) of block inputs (N, T, d) given context features (N, W, d)
        (or their cached per-layer projections ``ctx_kv``)."""
        if ctx_kv is None:
            ctx_kv = self.project_context(ctx)
        w, t = ctx_mask.shape[1], inputs.shape[1]
        pos = torch.arange(w, w + t, device=inputs.device)
        mask = self._mask(ctx_mask, t)
        x = inputs
        for layer, kv in zip(self.layers, ctx_kv, strict=True):
            x, _ = layer(x, kv, mask, pos)
        return self.out_norm(x)

    def _block_inputs(self, anchor: torch.Tensor, prev: torch.Tensor | None, t: int) -> torch.Tensor:
        a = self.embed(anchor)[:, None]
        if self.config.kind == "ar":
            return a if prev is None or t == 1 else torch.cat([a, self.embed(prev[:, : t - 1])], dim=1)
        return torch.cat([a, self.mask_embed.expand(a.shape[0], t - 1, -1)], dim=1)

    def _seq_bias(self, h_k: torch.Tensor, prev_tok: torch.Tensor, state: torch.Tensor | None
                  ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """(logit bias, Markov feature for the confidence head, new RNN state) at one slot."""
        kind = self.config.kind
        if kind not in ("markov", "rnn"):
            return None, None, None
        e = self.w1(prev_tok)
        if kind == "markov":
            return self.w2(e), e, None
        z = torch.cat([state, e, h_k], dim=-1)
        g, c, o = self.rnn(z).chunk(3, dim=-1)
        gate = torch.sigmoid(g)
        state = gate * state + (1 - gate) * torch.tanh(c)
        return self.w2(torch.tanh(o)), e, state

    def _conf(self, h_k: torch.Tensor, feat: torch.Tensor | None) -> torch.Tensor:
        x = h_k if feat is None else torch.cat([h_k, feat], dim=-1)
        return self.conf_head(x).squeeze(-1)

    def forward_train(self, ctx: torch.Tensor, ctx_mask: torch.Tensor, anchor: torch.Tensor,
                      targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced block: draft logits (N, γ, K) over the draft vocabulary (K = V unless reduced)
        and confidence logits (N, γ); the previous tokens fed to the sequential head / AR inputs are the
        ground truth (anchor, targets[:-1])."""
        g = targets.shape[1]
        prev = torch.cat([anchor[:, None], targets[:, :-1]], dim=1)
        h = self.backbone(ctx, ctx_mask, self._block_inputs(anchor, targets, g))
        logits = self.draft_logits(h)
        kind = self.config.kind
        if kind == "markov":
            e = self.w1(prev)
            return logits + self.w2(e), self._conf(h, e)
        if kind == "rnn":
            state = h.new_zeros(h.shape[0], self.config.rank)
            biases, feats = [], []
            for k in range(g):
                b, e, state = self._seq_bias(h[:, k], prev[:, k], state)
                biases.append(b)
                feats.append(e)
            return logits + torch.stack(biases, 1), self._conf(h, torch.stack(feats, 1))
        return logits, self._conf(h, None)

    @torch.no_grad()
    def draft(self, ctx: torch.Tensor | None, ctx_mask: torch.Tensor, anchor: torch.Tensor, temperature: float,
              generator: torch.Generator | None = None, gamma: int | None = None,
              ctx_kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> DraftOutput:
        """Draft γ tokens for R requests; exact per-token draft distributions are returned for
        rejection sampling (temperature > 0) — greedy drafts take the argmax.

        Everything stays on ``anchor``'s device (``generator`` must live there too). Sampling uses
        the Gumbel-max trick with all noise drawn in one call, so the sequential head's loop is a
        few tensor ops per slot; the exact softmaxes are computed once, batched, after the loop."""
        import time

        g = gamma or self.config.gamma
        n = anchor.shape[0]
        dev = anchor.device
        greedy = temperature <= 0
        t0 = time.perf_counter()
        if ctx_kv is None:
            ctx_kv = self.project_context(ctx)
        gumbel = None
        if not greedy:
            u = torch.rand(n, g, len(self.vocab_ids), generator=generator, device=dev, dtype=torch.float64)
            gumbel = -torch.log(-torch.log(u.clamp_min(1e-300)))

        def pick(logits: torch.Tensor, k: int) -> torch.Tensor:
            """A target token id drawn from draft-vocabulary logits."""
            if greedy:
                return self.to_target_ids(logits.argmax(-1))
            # exact sample of softmax(l/T)
            return self.to_target_ids((logits.double() / temperature + gumbel[:, k]).argmax(-1))

        def finish(tokens: torch.Tensor, logits: torch.Tensor, conf: torch.Tensor, timings: dict) -> DraftOutput:
            probs = None if greedy else self.full_probs(torch.softmax(logits.double() / temperature, dim=-1))
            return DraftOutput(tokens, probs, conf, timings)

        if self.config.kind == "ar":
            # EAGLE-style with a KV cache: one single-slot pass per drafted token over the cached
            # context projections and the cached keys/values of the earlier drafted slots
            w = ctx_mask.shape[1]
            past: list = [None] * len(self.layers)
            toks, hs, logit_rows = [], [], []
            prev = anchor
            for k in range(g):
                x = self.embed(prev)[:, None]
                mask = torch.cat([ctx_mask, torch.ones(n, k + 1, dtype=torch.bool, device=dev)], 1)[:, None]
                pos = torch.tensor([w + k], device=dev)
                for li, (layer, kv) in enumerate(zip(self.layers, ctx_kv, strict=True)):
                    x, past[li] = layer(x, kv, mask, pos, past[li])
                h = self.out_norm(x)[:, -1]
                lg = self.draft_logits(h)
                prev = pick(lg, k)
                toks.append(prev)
                hs.append(h)
                logit_rows.append(lg)
            h_all = torch.stack(hs, 1)
            return finish(torch.stack(toks, 1), torch.stack(logit_rows, 1), self._conf(h_all, None),
                          {"backbone_s": time.perf_counter() - t0, "sequential_s": 0.0})
        h = self.backbone(None, ctx_mask, self._block_inputs(anchor, None, g), ctx_kv=ctx_kv)
        logits = self.draft_logits(h)
        t1 = time.perf_counter()
        kind = self.config.kind
        feat = None
        if kind == "parallel":
            tokens = self.to_target_ids(logits.argmax(-1) if greedy
                                        else (logits.double() / temperature + gumbel).argmax(-1))
        else:
            # the sequential head: x_k = pick(base_k + W2·W1[x_{k−1}]), inherently left to right
            toks = []
            prev = anchor
            state = h.new_zeros(n, self.config.rank) if kind == "rnn" else None
            biases = []
            w2 = self.w2.weight.t()
            for k in range(g):
                if kind == "markov":
                    b = self.w1(anchor if self.head_input == "anchor" else prev) @ w2
                else:
                    b, _, state = self._seq_bias(h[:, k], prev, state)
                biases.append(b)
                prev = pick(logits[:, k] + b, k)
                toks.append(prev)
            tokens = torch.stack(toks, 1)
            logits = logits + torch.stack(biases, 1)
            # confidences need only the previous tokens, all known now: one batched head call
            # (c_k depends on x_{k-1} exactly as in the loop, so nothing anticipates x_k)
            feat = self.w1(torch.cat([anchor[:, None], tokens[:, : g - 1]], dim=1))
        conf = self._conf(h[:, :g], feat)
        t2 = time.perf_counter()
        return finish(tokens, logits, conf, {"backbone_s": t1 - t0, "sequential_s": t2 - t1})


def anchor_head_sham(drafter: Drafter) -> Drafter:
    """The same trained Markov drafter with its sequential head fed the block's anchor token at every slot instead
    of the token drafted just before: the head keeps its weights and the size of its bias, but no longer conditions
    on what was drafted. The negative control of a claim that the sequential head raises acceptance. A shallow copy
    that shares the weights."""
    import copy

    if drafter.config.kind != "markov":
        raise ValueError(f"anchor_head_sham needs a markov drafter, got kind {drafter.config.kind!r}")
    sham = copy.copy(drafter)
    sham.head_input = "anchor"
    return sham


def count_trainable(drafter: Drafter) -> int:
    return sum(p.numel() for p in drafter.parameters())
