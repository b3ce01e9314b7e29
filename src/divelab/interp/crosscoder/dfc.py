"""TopK crosscoder and the Dedicated Feature Crosscoder (DFC, Jiralerspong & Bricken; as in the E175 authors'
``dfc.py``): one dictionary over two models' activations, split into A-exclusive / B-exclusive / shared features.
Forbidden encoder and decoder weights are masked in the forward pass and zeroed after every optimizer step, so
they are exactly zero. A plain crosscoder is the DFC with empty exclusive partitions.

Dead latents (no activation over the last ``dead_window`` training tokens) are kept alive with the auxiliary-k
(AuxK) loss of Gao et al. 2024 ("Scaling and evaluating sparse autoencoders"): the ``aux_k`` largest dead
pre-activations must reconstruct the main reconstruction's residual, weighted by ``aux_coeff``. Without it the
exclusive features, which read from one model only, lose every top-k slot to the shared ones, never receive a
gradient and stay dead.

Compact torch implementation: ``dictionary_learning`` on PyPI (0.1.0) has no crosscoder (the crosscoder classes
live in unpublished forks) and SAELens trains single-model SAEs, so neither provides the DFC partition or masks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

A, B = 0, 1

KEEP_ALIVE: dict = {"resample": (0.2, 0.4, 0.6)}
"""The reproduction's remedy for dead latents on top of AuxK: resampling (Bricken et al. 2023) at 20, 40 and 60 % of
training, each resampled encoder at the live encoders' mean norm (Bricken et al.'s 0.2 times that norm is for ReLU
dictionaries; under top-k such a latent never wins a slot), so 40 % of training follows the last resampling."""


@dataclass(frozen=True)
class CrosscoderConfig:
    """One crosscoder: its dictionary, partitions, penalties and training."""

    dict_size: int = 256
    """latents in the dictionary"""
    k: int = 8
    """latents active per token (top-k)"""
    excl_share: float = 0.1
    """p: the A-exclusive and B-exclusive partitions each get round(p * dict_size) latents; 0 gives a plain
    crosscoder"""
    lambda_shared: float = 1e-3
    """L1 weight on the shared latents' activations"""
    lambda_excl: float = 0.0
    """L1 weight on each model's latents (its exclusive block and the shared one), averaged over the two"""
    steps: int = 600
    """training steps"""
    batch_size: int = 256
    """activation pairs per step"""
    lr: float = 1e-3
    """learning rate"""
    aux_coeff: float = 1 / 32
    """AuxK weight (Gao et al. 2024 use 1/32); 0 turns the dead-latent loss off"""
    aux_k: int = 0
    """dead latents in the AuxK reconstruction; 0 means d_model // 2 (Gao et al.'s choice)"""
    dead_window: int = 10_000
    """a latent is dead after this many training tokens without firing"""
    resample: tuple[float, ...] = ()
    """fractions of training at which dead latents are re-initialised (the resampling of Bricken et al. 2023,
    "Towards Monosemanticity"): each dead latent gets the reconstruction error of a training row drawn with
    probability proportional to its squared error on the models the latent may touch; () turns it off"""
    resample_enc: float = 1.0
    """a resampled latent's encoder norm, as a multiple of the mean live encoder norm (Bricken et al. use 0.2 in a
    ReLU dictionary; under top-k a latent that small never wins a slot, so 1)"""
    topk_by_norm: bool = False
    """pick the top-k latents by activation times decoder norm (each latent's contribution to the
    reconstruction) rather than by activation alone, so a latent whose decoder touches one model competes on
    the same scale as one touching both (the per-partition normalisation of crosscoder top-k selection)"""
    seed: int = 0
    """seed of the initialisation and the batch order"""

    def __post_init__(self) -> None:
        if self.dict_size < 2 or not 1 <= self.k <= self.dict_size:
            raise ValueError(f"need dict_size >= 2 and 1 <= k <= dict_size, got dict_size={self.dict_size}, "
                             f"k={self.k}")
        if not 0 <= self.excl_share < 0.5:
            raise ValueError(f"excl_share must be in [0, 0.5), got {self.excl_share}")
        if self.aux_coeff < 0 or self.aux_k < 0 or self.dead_window < 1:
            raise ValueError(f"need aux_coeff >= 0, aux_k >= 0 and dead_window >= 1, got {self.aux_coeff}, "
                             f"{self.aux_k}, {self.dead_window}")
        if any(not 0 < f < 1 for f in self.resample):
            raise ValueError(f"resample fractions must lie in (0, 1), got {self.resample}")

    @property
    def arch(self) -> str:
        return "DFC" if self.n_excl else "CC"

    @property
    def n_excl(self) -> int:
        return round(self.excl_share * self.dict_size)

    def label(self) -> str:
        s = f"{self.arch} D{self.dict_size} k{self.k}"
        return s + (f" p{round(100 * self.excl_share)}% lx{self.lambda_excl:g}" if self.n_excl else "")


class Crosscoder(torch.nn.Module):
    """Features ``[0, n_a)`` are A-exclusive, ``[n_a, n_a + n_b)`` B-exclusive, the rest shared."""

    def __init__(self, d_model: int, config: CrosscoderConfig, scale: tuple[float, float] = (1.0, 1.0)) -> None:
        super().__init__()
        self.config, self.d_model = config, d_model
        D, n = config.dict_size, config.n_excl
        self.n_a = self.n_b = n
        g = torch.Generator().manual_seed(config.seed)
        mask = torch.ones(D, 2)
        mask[:n, B] = 0
        mask[n:2 * n, A] = 0
        # each feature's decoder (and tied encoder) has norm 0.1 over the models it may touch, so a feature
        # reading one model starts with pre-activations as large as a shared one reading both
        dec = torch.randn(D, 2, d_model, generator=g) * mask[:, :, None]
        dec = dec / dec.flatten(1).norm(dim=-1)[:, None, None] * 0.1
        self.W_dec = torch.nn.Parameter(dec)
        self.W_enc = torch.nn.Parameter(dec.permute(1, 2, 0).clone())  # [2, d, D]
        self.b_enc = torch.nn.Parameter(torch.zeros(D))
        self.b_dec = torch.nn.Parameter(torch.zeros(2, d_model))
        self.register_buffer("mask", mask)  # [D, 2]: may feature i read from / write to model m
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))  # per-model activation scale
        # training tokens since each latent last fired (not saved: it describes one training run)
        self.register_buffer("since_fired", torch.zeros(D, dtype=torch.long), persistent=False)
        self.enforce_masks()

    # partitions ------------------------------------------------------------------------------------------------
    @property
    def a_slice(self) -> slice:
        return slice(0, self.n_a)

    @property
    def b_slice(self) -> slice:
        return slice(self.n_a, self.n_a + self.n_b)

    @property
    def shared_slice(self) -> slice:
        return slice(self.n_a + self.n_b, self.config.dict_size)

    def partition(self) -> list[str]:
        return ["A"] * self.n_a + ["B"] * self.n_b + ["shared"] * (self.config.dict_size - self.n_a - self.n_b)

    @torch.no_grad()
    def enforce_masks(self) -> None:
        """Zero every forbidden weight (after each optimizer step: the 'gradient masking' of ``dfc.py``)."""
        self.W_dec.mul_(self.mask[:, :, None])
        self.W_enc.mul_(self.mask.T[:, None, :])

    def forbidden_max(self) -> float:
        """Largest absolute forbidden weight (0.0 exactly when exclusivity holds)."""
        with torch.no_grad():
            dec = (self.W_dec * (1 - self.mask[:, :, None])).abs().max()
            enc = (self.W_enc * (1 - self.mask.T[:, None, :])).abs().max()
        return float(max(dec, enc))

    # forward ---------------------------------------------------------------------------------------------------
    def pre_acts(self, xa: torch.Tensor | None, xb: torch.Tensor | None) -> torch.Tensor:
        """ReLU pre-activations before top-k from either or both models (raw activations, any leading shape)."""
        We = self.W_enc * self.mask.T[:, None, :]
        out = self.b_enc
        if xa is not None:
            out = out + (xa / self.scale[A]) @ We[A]
        if xb is not None:
            out = out + (xb / self.scale[B]) @ We[B]
        return torch.relu(out)

    def topk(self, pre: torch.Tensor) -> torch.Tensor:
        if self.config.topk_by_norm:
            norm = (self.W_dec * self.mask[:, :, None]).flatten(1).norm(dim=-1).detach()
            idx = (pre * norm).topk(self.config.k, dim=-1).indices
            vals = pre.gather(-1, idx)
        else:
            vals, idx = pre.topk(self.config.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, idx, vals)

    def encode(self, xa: torch.Tensor | None, xb: torch.Tensor | None) -> torch.Tensor:
        return self.topk(self.pre_acts(xa, xb))

    def decode(self, f: torch.Tensor, model: int | None = None) -> torch.Tensor:
        """Reconstruction in raw activation space: [..., 2, d], or [..., d] for one ``model`` (0 = A, 1 = B)."""
        Wd = self.W_dec * self.mask[:, :, None]
        out = torch.einsum("...i,imd->...md", f, Wd) + self.b_dec
        out = out * self.scale[:, None]
        return out if model is None else out[..., model, :]

    def direction(self, feature: int, model: int) -> torch.Tensor:
        """Feature ``feature``'s decoder vector into ``model``, in raw activation space (per unit activation)."""
        return (self.W_dec[feature, model] * self.mask[feature, model]) * self.scale[model]

    def loss(self, xa: torch.Tensor, xb: torch.Tensor,
             dead: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        """MSE (normalised space) + λ_sh·mean|f_shared| + λ_excl·½(mean|f_{A∪shared}| + mean|f_{B∪shared}|), plus
        ``aux_coeff``·AuxK when a ``dead`` latent mask is given (training)."""
        total, stats, _ = self._loss(xa, xb, dead)
        return total, stats

    def _loss(self, xa: torch.Tensor, xb: torch.Tensor,
              dead: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
        pre = self.pre_acts(xa, xb)
        f = self.topk(pre)
        x = torch.stack([xa / self.scale[A], xb / self.scale[B]], dim=-2)
        err = x - self.decode(f) / self.scale[:, None]
        mse = (err ** 2).mean()
        c = self.config
        sh = f[:, self.shared_slice].abs()
        l_sh = sh.mean() if sh.numel() else f.new_zeros(())
        a_sh = torch.cat([f[:, self.a_slice], f[:, self.shared_slice]], -1).abs().mean()
        b_sh = torch.cat([f[:, self.b_slice], f[:, self.shared_slice]], -1).abs().mean()
        total = mse + c.lambda_shared * l_sh + c.lambda_excl * 0.5 * (a_sh + b_sh)
        aux = f.new_zeros(())
        if dead is not None and c.aux_coeff > 0 and bool(dead.any()):
            aux = self._auxk(pre, dead, err.detach())
            total = total + c.aux_coeff * aux
        return total, {"mse": float(mse.detach()), "l1_shared": float(l_sh.detach()), "auxk": float(aux.detach())}, f

    def _auxk(self, pre: torch.Tensor, dead: torch.Tensor, err: torch.Tensor) -> torch.Tensor:
        """AuxK (Gao et al. 2024): the top ``aux_k`` dead latents reconstruct the residual ``err`` [b, 2, d] of the
        main reconstruction (decoder without bias); normalised MSE, so its scale does not shrink as the main
        reconstruction improves. Gradient reaches only the dead latents' encoder and decoder rows."""
        k = min(self.config.aux_k or max(self.d_model // 2, 1), int(dead.sum()))
        vals, idx = pre.masked_fill(~dead, 0.0).topk(k, dim=-1)
        z = torch.zeros_like(pre).scatter(-1, idx, vals)
        e_hat = torch.einsum("bi,imd->bmd", z, self.W_dec * self.mask[:, :, None])
        return ((e_hat - err) ** 2).mean() / ((err - err.mean(0)) ** 2).mean().clamp(min=1e-12)

    @torch.no_grad()
    def track_firing(self, f: torch.Tensor) -> None:
        """Advance every latent's count of tokens since it last fired by the batch, reset the ones that fired."""
        self.since_fired += f.shape[0]
        self.since_fired[(f > 0).any(0)] = 0

    def dead_latents(self) -> torch.Tensor:
        """Bool mask of latents that did not fire over the last ``dead_window`` training tokens."""
        return self.since_fired >= self.config.dead_window

    def save_dict(self) -> dict:
        return {"config": asdict(self.config), "d_model": self.d_model, "state": self.state_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> Crosscoder:
        cc = cls(d["d_model"], CrosscoderConfig(**d["config"]))
        cc.load_state_dict(d["state"])
        return cc


def train_crosscoder(acts_a: torch.Tensor, acts_b: torch.Tensor, config: CrosscoderConfig) -> Crosscoder:
    """Train on paired activations ``[n, d]`` (Adam; masks enforced after every step; AuxK on dead latents; dead
    latents resampled at the fractions ``config.resample`` of training)."""
    if acts_a.shape != acts_b.shape or acts_a.ndim != 2:
        raise ValueError(f"paired activations must both be [n, d] of one shape, got {tuple(acts_a.shape)} and "
                         f"{tuple(acts_b.shape)}")
    d = acts_a.shape[1]
    scale = tuple(float(x.norm(dim=-1).mean() / d ** 0.5) for x in (acts_a, acts_b))
    cc = Crosscoder(d, config, scale=scale)  # type: ignore[arg-type]
    g = torch.Generator().manual_seed(config.seed)
    n = acts_a.shape[0]
    at = {max(1, round(f * config.steps)) for f in config.resample}
    opt = torch.optim.Adam(cc.parameters(), lr=config.lr)
    cc.resampled = 0
    cc.train()
    with torch.enable_grad():
        for step in range(1, config.steps + 1):
            idx = torch.randint(0, n, (min(config.batch_size, n),), generator=g)
            total, _, f = cc._loss(acts_a[idx], acts_b[idx], cc.dead_latents())
            if not torch.isfinite(total):
                raise FloatingPointError(f"crosscoder loss is {float(total)} at step {step}")
            opt.zero_grad(set_to_none=True)
            total.backward()
            opt.step()
            cc.enforce_masks()
            cc.track_firing(f)
            if step in at:
                cc.resampled += resample_dead(cc, acts_a, acts_b, opt, g)
    cc.eval()
    return cc


@torch.no_grad()
def resample_dead(cc: Crosscoder, acts_a: torch.Tensor, acts_b: torch.Tensor, opt: torch.optim.Optimizer,
                  g: torch.Generator, rows: int = 4096) -> int:
    """Re-initialise every dead latent (Bricken et al. 2023, "Towards Monosemanticity", neuron resampling): on
    ``rows`` random training rows, draw one row per dead latent with probability proportional to the square of
    its reconstruction error on the models the latent may touch (an A-exclusive latent sees only model A's
    error), and point the latent's decoder along that error (norm: the mean of the live decoders) and its
    encoder along the same direction at ``resample_enc`` times the mean live encoder norm, with a zero bias; the optimiser's
    moments of those weights restart at zero. The latent stays counted as dead, so AuxK trains it until it
    fires. Returns the number of latents resampled."""
    dead = torch.nonzero(cc.dead_latents()).flatten()
    if not dead.numel():
        return 0
    live = ~cc.dead_latents()
    idx = torch.randint(0, acts_a.shape[0], (min(rows, acts_a.shape[0]),), generator=g)
    xa, xb = acts_a[idx], acts_b[idx]
    x = torch.stack([xa / cc.scale[A], xb / cc.scale[B]], dim=-2)
    err = x - cc.decode(cc.encode(xa, xb)) / cc.scale[:, None]  # [r, 2, d], normalised space
    sq = (err ** 2).sum(-1)  # [r, 2]
    dec_norm = (cc.W_dec * cc.mask[:, :, None]).flatten(1).norm(dim=-1)
    enc_norm = (cc.W_enc * cc.mask.T[:, None, :]).permute(2, 0, 1).flatten(1).norm(dim=-1)
    dn = float(dec_norm[live].mean()) if bool(live.any()) else 0.1
    en = float(enc_norm[live].mean()) if bool(live.any()) else 0.1
    for i in dead.tolist():
        m = cc.mask[i]  # [2]
        p = ((sq * m).sum(-1)) ** 2
        if float(p.sum()) <= 0:
            continue
        r = int(torch.multinomial(p / p.sum(), 1, generator=g))
        v = err[r] * m[:, None]
        v = v / v.flatten().norm().clamp(min=1e-12)
        cc.W_dec[i] = v * dn
        cc.W_enc[:, :, i] = v * en * cc.config.resample_enc
        cc.b_enc[i] = 0.0
    for p, sl in ((cc.W_dec, (dead,)), (cc.W_enc, (slice(None), slice(None), dead)), (cc.b_enc, (dead,))):
        st = opt.state.get(p, {})
        for key in ("exp_avg", "exp_avg_sq"):
            if key in st:
                st[key][sl] = 0.0
    cc.enforce_masks()
    return int(dead.numel())


@torch.no_grad()
def reconstruction_mse(cc: Crosscoder, acts_a: torch.Tensor, acts_b: torch.Tensor) -> float:
    return float(cc.loss(acts_a, acts_b)[1]["mse"])
