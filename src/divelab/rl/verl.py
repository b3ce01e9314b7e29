"""divelab's step-level advantage estimators with verl's / SkyRL's estimator signature.

verl (``verl.trainer.ppo.core_algos``) and SkyRL (``skyrl.backends.skyrl_train.utils.ppo_utils``)
call a registered estimator as ``fn(token_level_rewards, response_mask, index, config=..., **kwargs)
-> (advantages, returns)`` on ``(bs, resp_len)`` tensors, ``index`` being each row's group id
(``uid``). In multi-turn agent training every row is **one step** of a trajectory, and the step-level
estimators (``gigpo``, ``g2po``) also need each row's trajectory, step number and state key. Those
are the **step fields** (:data:`STEP_FIELDS`): ``traj_uid``, ``step_id``, ``state_key`` (and the
optional ``next_state_key`` and ``step_reward``, the step's own reward, used instead of the row's
summed token rewards; verl-agent's ``anchor_obs`` is accepted for ``state_key``). They reach
the estimator as keyword arguments of those names, as a ``non_tensor_batch`` mapping that holds them
(what verl's agent loop writes from ``AgentLoopOutput.extra_fields``), or through
:mod:`divelab.rl.verl_plugin` (verl) / :mod:`divelab.rl.skyrl` (SkyRL).

There is **no silent fallback**: without the step fields the estimator raises a ``ValueError`` that
names them, instead of treating every row as a one-step trajectory (which would make ``grpo``,
``gigpo`` and ``g2po`` all row-level GRPO). Declaring ``rows="trajectories"`` opts into "each row is
a whole trajectory" explicitly.

The trainer's options are honoured, never swallowed: ``gamma`` (verl ``algorithm.gamma``, SkyRL
``trainer.algorithm.gamma``) is the discount of ``gigpo``/``g2po`` (a different ``gamma`` given to
:func:`make_verl_estimator` is an error, not an override); ``norm_adv_by_std_in_grpo`` /
``grpo_norm_by_std`` = False is Dr.GRPO for ``grpo``/``gigpo`` and rejected for ``g2po`` (its TD
errors are standardised by construction); ``lam``/``lambd`` != 1 is rejected (no GAE here);
``grpo`` rejects ``gamma`` != 1 (its episode return is undiscounted).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch

from divelab.rl.advantages import StepBatch, get_advantage

STEP_FIELDS = ("traj_uid", "step_id", "state_key")
OPTIONAL_STEP_FIELDS = ("next_state_key", "step_reward")
_ALIASES = {"traj_uid": ("traj_index",), "step_id": ("step_ids",), "state_key": ("state_keys", "anchor_obs"),
            "next_state_key": ("next_state_keys",), "step_reward": ()}

# set by divelab.rl.verl_plugin around verl's compute_advantage: (the batch's non_tensor_batch, the
# call's trainer options, advice for that trainer path when the step fields are missing)
CURRENT_BATCH: ContextVar[tuple[Mapping[str, Any], dict[str, Any], str] | None] = ContextVar(
    "divelab_verl_batch", default=None)


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, torch.Tensor | np.ndarray):
        return x.tolist() if x.ndim == 1 else list(x)  # 1-D object arrays keep their tuples
    return list(x)


def _objects(values: Sequence[Any]) -> np.ndarray:
    """A 1-D object array (np.array would turn a list of equal-length tuples into a 2-D array)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _get(cfg: Any, *names: str) -> Any:
    for n in names:
        if cfg is None:
            return None
        if isinstance(cfg, Mapping):
            if n in cfg and cfg[n] is not None:
                return cfg[n]
        elif getattr(cfg, n, None) is not None:
            return getattr(cfg, n)
    return None


def trainer_options(config: Any, kwargs: Mapping[str, Any], extra: Mapping[str, Any] | None = None,
                    ) -> dict[str, Any]:
    """``gamma`` / ``norm_by_std`` / ``lam`` as the trainer set them: explicit keyword arguments
    (SkyRL passes ``gamma``, ``lambd``, ``grpo_norm_by_std``), then the plugin's record of verl's
    ``compute_advantage`` call, then the algorithm config (verl ``AlgoConfig``, SkyRL ``AlgorithmConfig``)."""
    out: dict[str, Any] = {}
    for key, names in (("gamma", ("gamma",)), ("lam", ("lam", "lambd")),
                       ("norm_by_std", ("norm_adv_by_std_in_grpo", "grpo_norm_by_std"))):
        v = _get(kwargs, *names)
        if v is None:
            v = _get(extra, *names)
        if v is None:
            v = _get(config, *names)
        if v is not None:
            out[key] = v
    return out


def _resolve_options(name: str, native: Callable[..., np.ndarray], options: dict[str, Any],
                     trainer: dict[str, Any]) -> dict[str, Any]:
    accepts = set(inspect.signature(native).parameters)
    opts = dict(options)
    if "lam" in trainer and float(trainer["lam"]) != 1.0:
        raise ValueError(f"divelab estimator {name!r} has no GAE lambda; the trainer set lam/lambd="
                         f"{trainer['lam']} (allowed: 1.0, the default)")
    if "gamma" in trainer:
        g = float(trainer["gamma"])
        if "gamma" in accepts:
            if "gamma" in opts and float(opts["gamma"]) != g:
                raise ValueError(f"gamma={opts['gamma']} was given to make_verl_estimator({name!r}) but the trainer's "
                                 f"gamma is {g}; set the trainer's gamma (verl: algorithm.gamma, SkyRL: "
                                 f"trainer.algorithm.gamma) to the value you want and drop the adapter option")
            opts["gamma"] = g
        elif g != 1.0:
            raise ValueError(f"divelab estimator {name!r} does not discount (its episode return is the plain sum); "
                             f"the trainer set gamma={g} (allowed: 1.0)")
    if "norm_by_std" in trainer:
        nb = bool(trainer["norm_by_std"])
        if "norm_by_std" in accepts:
            if "norm_by_std" in opts and bool(opts["norm_by_std"]) != nb:
                raise ValueError(f"norm_by_std={opts['norm_by_std']} was given to make_verl_estimator({name!r}) "
                                 f"but the trainer's norm_adv_by_std_in_grpo/grpo_norm_by_std is {nb}")
            opts["norm_by_std"] = nb
        elif not nb:
            raise ValueError(f"divelab estimator {name!r} always divides by the standard deviation (g2po standardises "
                             f"its TD errors by construction); the trainer set norm_adv_by_std_in_grpo/"
                             f"grpo_norm_by_std=False (allowed: True), or pick 'grpo'/'gigpo' for the unnormalised "
                             f"(Dr.GRPO) variant")
    return opts


#: what to do when the step fields are missing, by the trainer path that called (see CURRENT_BATCH)
GENERAL_ADVICE = (
    "verl's default trainer (trainer.use_v1=true): return one AgentLoopOutput per step from the agent loop "
    "(divelab.rl.verl_plugin.step_outputs) with extra_fields['state_key'], and load divelab.rl.verl_plugin in the "
    "Ray workers (+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=divelab.rl.verl_plugin.setup); "
    "verl's legacy trainer (trainer.use_v1=false): one row per step with the fields in non_tensor_batch (from "
    "AgentLoopOutput.extra_fields) and the same hook; SkyRL or a direct call: pass them as keyword arguments "
    "(traj_uid=, step_id=, state_key=) to compute_advantages_and_returns")


def _step_fields(bs: int, kwargs: Mapping[str, Any], non_tensor_batch: Mapping[str, Any] | None,
                 name: str, advice: str = GENERAL_ADVICE) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for field in STEP_FIELDS + OPTIONAL_STEP_FIELDS:
        for src in (kwargs, non_tensor_batch or {}):
            for key in (field, *_ALIASES.get(field, ())):
                if key in src and src[key] is not None:
                    found[field] = _as_list(src[key])
                    break
            if field in found:
                break
    missing = [f for f in STEP_FIELDS if f not in found]
    if missing:
        raise ValueError(
            f"divelab estimator {name!r} needs the per-row step fields {', '.join(STEP_FIELDS)} (missing: "
            f"{', '.join(missing)}). {advice}. Without them every row would be a one-step trajectory, i.e. "
            f"row-level GRPO, so this is refused; pass rows='trajectories' to make_verl_estimator if each row "
            f"really is a whole trajectory.")
    for f, v in found.items():
        if len(v) != bs:
            raise ValueError(f"step field {f} has {len(v)} entries for {bs} rows")
    return found


class VerlEstimator:
    """divelab's estimator ``name`` with verl's/SkyRL's signature ``fn(token_level_rewards, response_mask,
    index, config=..., **kwargs) -> (advantages, returns)``.

    A module-level class, not a closure, so that ``cloudpickle`` ships it by reference: SkyRL pickles
    registered estimators into a Ray actor, and a closure over :data:`CURRENT_BATCH` (a ``ContextVar``)
    cannot be pickled.
    """

    def __init__(self, name: str, rows: str = "steps", **options: Any) -> None:
        if rows not in ("steps", "trajectories"):
            raise ValueError(f"rows must be 'steps' or 'trajectories', got {rows!r}")
        get_advantage(name)  # an unknown name fails here, naming the known ones
        self.name, self.rows, self.options = name, rows, dict(options)
        self.__name__ = self.__qualname__ = f"divelab_{name}"
        self.__doc__ = f"divelab estimator {name!r} ({options}) with verl's/SkyRL's signature."

    def __repr__(self) -> str:
        return f"VerlEstimator({self.name!r}, rows={self.rows!r}, **{self.options!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VerlEstimator) and (self.name, self.rows, self.options) == (
            other.name, other.rows, other.options)

    def __hash__(self) -> int:
        return hash((self.name, self.rows))

    def __call__(self, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                 epsilon: float = 1e-6, config: Any = None, non_tensor_batch: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        name, native = self.name, get_advantage(self.name)
        bs = token_level_rewards.shape[0]
        if response_mask.shape != token_level_rewards.shape:
            raise ValueError(f"response_mask shape {tuple(response_mask.shape)} != token_level_rewards shape "
                             f"{tuple(token_level_rewards.shape)}")
        if index is None:
            raise ValueError(f"divelab estimator {name!r} needs index (the group uid of each row); got None "
                             f"(verl passes non_tensor_batch['uid'] when the batch has it)")
        groups = _as_list(index)
        if len(groups) != bs:
            raise ValueError(f"index has {len(groups)} entries for {bs} rows")
        ctx = CURRENT_BATCH.get()
        extra: dict[str, Any] = {}
        advice = GENERAL_ADVICE
        if non_tensor_batch is None and ctx is not None:
            non_tensor_batch, extra, advice = ctx
        if self.rows == "trajectories" and not any(k in kwargs or k in (non_tensor_batch or {})
                                                   for f in STEP_FIELDS for k in (f, *_ALIASES[f])):
            fields = {"traj_uid": list(range(bs)), "step_id": [0] * bs,
                      "state_key": [("row", i) for i in range(bs)]}
        else:
            fields = _step_fields(bs, kwargs, non_tensor_batch, name, advice)
        trajs, keys = fields["traj_uid"], fields["state_key"]
        steps = [int(s) for s in fields["step_id"]]
        opts = _resolve_options(name, native, self.options, trainer_options(config, kwargs, extra))
        if "step_reward" in fields:  # the rollout's own per-step rewards (verl v1 copies the final one to all)
            rewards = np.asarray(fields["step_reward"], dtype=np.float64)
        else:
            rewards = (token_level_rewards * response_mask).sum(-1).detach().double().cpu().numpy()
        # dense ids for groups and trajectories, whatever their original type (uids are strings)
        gid: dict[Any, int] = {}
        tid: dict[Any, int] = {}
        g_arr = np.array([gid.setdefault(g, len(gid)) for g in groups], dtype=np.int64)
        t_arr = np.array([tid.setdefault((g, t), len(tid)) for g, t in zip(groups, trajs, strict=True)],
                         dtype=np.int64)
        if "next_state_key" not in fields:
            nxt: list[Hashable | None] = [None] * bs
            by_traj: dict[int, list[int]] = {}
            for i, t in enumerate(t_arr):
                by_traj.setdefault(int(t), []).append(i)
            dones = np.zeros(bs, dtype=bool)
            for rws in by_traj.values():
                rws.sort(key=lambda i: steps[i])
                for a, b in zip(rws, rws[1:], strict=False):
                    nxt[a] = keys[b]
                dones[rws[-1]] = True
        else:
            nxt = list(fields["next_state_key"])
            dones = np.array([k is None for k in nxt], dtype=bool)
        batch = StepBatch(t_arr, g_arr, np.array(steps, dtype=np.int64), rewards, dones, keys, nxt)
        opts.setdefault("epsilon", epsilon)
        adv = torch.as_tensor(native(batch, **opts), dtype=token_level_rewards.dtype,
                              device=token_level_rewards.device)
        scores = adv.unsqueeze(-1) * response_mask
        return scores, scores


def make_verl_estimator(name: str, rows: str = "steps", **options: Any) -> VerlEstimator:
    """A verl/SkyRL-signature estimator wrapping the divelab estimator ``name`` (a picklable object).

    ``rows="steps"`` (default): each row is one step; the step fields are required. ``rows="trajectories"``:
    each row is a whole one-step trajectory (state key = the row); only then may the fields be absent.
    ``options`` go to the native estimator (``episode_weight``, ``edge_weight``, ...); trainer options
    (``gamma``, std normalisation, lambda) come from the trainer, see the module docstring.
    """
    return VerlEstimator(name, rows, **options)


def step_fields_for(batch: StepBatch) -> dict[str, np.ndarray]:
    """The ``non_tensor_batch`` step fields of a StepBatch (what a rollout writes per row)."""
    return {"traj_uid": np.array([f"traj-{t}" for t in batch.traj_index], dtype=object),
            "step_id": batch.step_id.copy(),
            "state_key": _objects(batch.state_keys), "next_state_key": _objects(batch.next_state_keys)}


def to_verl_tensors(batch: StepBatch, resp_len: int = 4, seed: int = 0) -> dict[str, Any]:
    """Token-level tensors for a StepBatch (rewards on each row's last valid token, random response
    lengths), the inverse of the adapter; used by the tests and the docs. Carries the step fields
    under both the :data:`STEP_FIELDS` names and the older ``traj_index``/``step_ids``/``state_keys``."""
    rng = np.random.default_rng(seed)
    n = len(batch)
    lengths = rng.integers(1, resp_len + 1, size=n)
    mask = torch.zeros(n, resp_len)
    rewards = torch.zeros(n, resp_len)
    for i, L in enumerate(lengths):
        mask[i, :L] = 1
        rewards[i, L - 1] = float(batch.rewards[i])
    f = step_fields_for(batch)
    return {"token_level_rewards": rewards, "response_mask": mask,
            "index": np.array([f"uid-{g}" for g in batch.group_index], dtype=object),
            "traj_index": f["traj_uid"], "step_ids": f["step_id"], "state_keys": list(batch.state_keys),
            "next_state_keys": list(batch.next_state_keys), "non_tensor_batch": f}
