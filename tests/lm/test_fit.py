"""divelab.lm.fit: the one optimisation loop (resume, clipping, schedule, early stop, argument errors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from divelab.lm import fit, warmup_cosine


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _loss_fn(model: torch.nn.Module, rng: np.random.Generator):
    x_all = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
    y_all = x_all.sum(1, keepdim=True)

    def loss_of_step(step: int) -> torch.Tensor:
        idx = torch.as_tensor(rng.choice(64, size=8, replace=False))
        noise = torch.randn(8, 1) * 0.01  # draws from torch's global RNG: a resume must restore it
        return ((model(x_all[idx]) - y_all[idx] - noise) ** 2).mean()

    return loss_of_step


def _run(steps: int, ckpt_dir=None, ckpt_every: int = 0, stop_at: int | None = None):
    model = _model()
    rng = np.random.default_rng(3)
    after = (lambda done, loss: done == stop_at) if stop_at else None
    r = fit(model, _loss_fn(model, rng), steps, lr=0.05, optimizer="adamw", weight_decay=0.01,
            schedule=warmup_cosine(steps, warmup=2, min_lr_ratio=0.1), grad_clip=1.0, seed=7, np_rng=rng,
            ckpt_dir=ckpt_dir, ckpt_every=ckpt_every, ckpt_key={"steps": steps}, after_step=after)
    return model, r


def test_resume_after_checkpoint_gives_the_uninterrupted_weights(tmp_path):
    full, r_full = _run(12)
    # the first call stops after step 6 (a checkpoint is written there), the second resumes from it
    _, r_cut = _run(12, ckpt_dir=tmp_path, ckpt_every=3, stop_at=6)
    assert r_cut.stopped_early and r_cut.steps == 6
    resumed, r_res = _run(12, ckpt_dir=tmp_path, ckpt_every=3)
    assert r_res.resumed_from == 6
    assert r_res.losses == r_full.losses
    for a, b in zip(full.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_checkpoint_of_another_configuration_is_refused(tmp_path):
    _run(4, ckpt_dir=tmp_path)
    with pytest.raises(ValueError, match="different configuration"):
        _run(5, ckpt_dir=tmp_path)


def test_gradient_clipping_bounds_the_update():
    # one SGD-like Adam step is lr * sign-ish regardless of scale, so use the gradient norm at step time
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    seen = []

    def loss_of_step(step: int) -> torch.Tensor:
        return 100.0 * (w ** 2).sum()  # gradient norm 1000

    orig = torch.optim.AdamW.step

    def spy(self, *a, **k):
        seen.append(float(w.grad.norm()))
        return orig(self, *a, **k)

    torch.optim.AdamW.step = spy
    try:
        fit([w], loss_of_step, 1, lr=0.1, grad_clip=0.5)
        fit([w], loss_of_step, 1, lr=0.1)
    finally:
        torch.optim.AdamW.step = orig
    assert seen[0] == pytest.approx(0.5, rel=1e-5)
    assert seen[1] > 100


def test_none_skips_the_update_and_after_step_still_runs():
    w = torch.nn.Parameter(torch.ones(2))
    calls = []
    r = fit([w], lambda i: None if i % 2 else (w ** 2).sum(), 4, lr=0.1,
            after_step=lambda done, loss: calls.append((done, loss)))
    assert [c[0] for c in calls] == [1, 2, 3, 4]
    assert r.losses[1] is None and r.losses[3] is None and r.losses[0] is not None


def test_module_modes_and_schedule():
    m = _model()
    modes = []

    def loss_of_step(step: int) -> torch.Tensor:
        modes.append(m.training)
        return m(torch.ones(1, 4)).sum()

    r = fit(m, loss_of_step, 3, lr=0.1, optimizer="adam")
    assert modes == [True, True, True] and not m.training and r.steps == 3
    f = warmup_cosine(10, warmup=2, min_lr_ratio=0.1)
    assert f(0) == 0.5 and f(1) == 1.0 and f(10) == pytest.approx(0.1)


def test_non_finite_loss_names_the_step():
    w = torch.nn.Parameter(torch.ones(1))
    with pytest.raises(FloatingPointError, match="at step 0"):
        fit([w], lambda i: w.sum() * float("inf"), 2, lr=0.1)


@pytest.mark.parametrize("kwargs, match", [
    ({"optimizer": "sgd"}, "optimizer must be one of adam, adamw"),
    ({"lr": 0.0}, "lr must be > 0"),
    ({"grad_clip": 0.0}, "grad_clip must be > 0"),
    ({"optimizer": "adam", "weight_decay": 0.1}, "weight_decay needs optimizer='adamw'"),
    ({"ckpt_every": 2}, "ckpt_every needs ckpt_dir"),
    ({"num_threads": 0}, "num_threads must be >= 1"),
    ({"steps": 0}, "steps must be an int >= 1"),
])
def test_bad_arguments_are_named(kwargs, match):
    w = torch.nn.Parameter(torch.ones(1))
    args = {"steps": 2, "lr": 0.1, **kwargs}
    with pytest.raises(ValueError, match=match):
        fit([w], lambda i: w.sum(), **args)


def test_checkpoints_need_a_module(tmp_path):
    w = torch.nn.Parameter(torch.ones(1))
    with pytest.raises(ValueError, match="need a torch.nn.Module"):
        fit([w], lambda i: w.sum(), 2, lr=0.1, ckpt_dir=tmp_path)
    with pytest.raises(ValueError, match="no trainable parameters"):
        fit([torch.ones(1)], lambda i: None, 2, lr=0.1)


def test_decay_all_decays_norms_as_torchs_adamw_default_does():
    from divelab.lm.fitting import make_optimizer

    lin, norm = torch.nn.Linear(3, 3, bias=False), torch.nn.LayerNorm(3, bias=False)
    params = [lin.weight, norm.weight]
    split = make_optimizer(params, "adamw", 1e-2, 0.01, (0.9, 0.999), None)
    every = make_optimizer(params, "adamw", 1e-2, 0.01, (0.9, 0.999), None, decay_all=True)
    assert [g["weight_decay"] for g in split.param_groups] == [0.01, 0.0]
    assert [(len(g["params"]), g["weight_decay"]) for g in every.param_groups] == [(2, 0.01)]
