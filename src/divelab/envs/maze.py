"""The layered dead-end maze: the path-finding graph of E163 (RLVR vs SFT, arXiv 2606.22938) with K, L
and W made explicit.

An environment of its own, shared by the systems that play it: the backtracking study
(:mod:`divelab.training.backtrack`) trains its walker policies on it, and InfoTree
(:mod:`divelab.training.infotree`) trains on a fixed set of its instances.

Reconstruction (the paper leaves W and L uncertain; this is ours, documented in docs/systems/backtrack.md):

- **K** — depth: the number of decision points (junctions) J_0 … J_{K-1} between start and goal.
- **L** — branching: every junction has L exits, exactly one of them correct. Which one is correct is
  drawn per junction per maze instance (seeded), so it cannot be memorised and the observation
  does not reveal it.
- **W** — dead-end length: every exit opens onto a corridor of W cells. A wrong exit's corridor ends
  in a dead end at its W-th cell (so a wrong try costs W steps in and W steps back out); the
  correct exit's corridor continues from its W-th cell to the next junction (or the goal).

So the shortest path has K·(W+1) steps, and an agent that backtracks optimally (tries untried exits,
walks straight back out of dead ends) needs K·(L·W+1) steps on average: Θ(W·K) at fixed L. An
agent that cannot backtrack must abandon the attempt at every dead end and start over; it needs
all K choices right in one attempt, L^K attempts on average: Θ(W·L^K).

Moves (actions): ``E0…E{L-1}`` take an exit at a junction; ``F`` steps deeper along a corridor;
``B`` steps back (out of a corridor towards its junction, or from a junction back up the spine);
``R`` (only at a dead end) gives up and restarts at J_0 — the analogue of abandoning a chain of
thought and sampling a fresh one, so a restart also starts a fresh context for the policy.

Observations are purely local: ``S`` (the start junction), ``J`` (a junction), ``C`` (a corridor
cell), ``D`` (a dead end), ``G`` (the goal). Each one fixes the set of legal moves, so the agent
always knows its available exits, but only its own history tells it which exits it already tried.

**Backward-facing states** (precise definition used everywhere here): a decision state is
backward-facing when the most recent exit taken in the current attempt led into a dead-end branch
*and that branch's dead end has been reached since*: the dead end itself, every cell on the way
back out of it (including any re-entries), and the junction after returning from it, up to the
moment a new exit is taken (or the attempt restarts). Golden shortest paths never take a wrong exit,
so they contain no backward-facing state at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

OBS_TOKENS = ("S", "J", "C", "D", "G")
MOVE_TOKENS = ("F", "B", "R")
MAX_BRANCHING = 6


def exit_token(i: int) -> str:
    return f"E{i}"


@dataclass(frozen=True)
class MazeSpec:
    """The maze family's three quantities (see the module docstring for the exact mapping)."""

    K: int  # depth: number of decision points
    L: int  # branching: exits per decision point, one correct
    W: int  # dead-end length: cells down a wrong branch before it dead-ends

    def __post_init__(self) -> None:
        if not (isinstance(self.K, int) and self.K >= 1):
            raise ValueError(f"K (depth) must be an integer >= 1, got {self.K!r}")
        if not (isinstance(self.L, int) and 2 <= self.L <= MAX_BRANCHING):
            raise ValueError(f"L (branching) must be an integer in [2, {MAX_BRANCHING}], got {self.L!r}")
        if not (isinstance(self.W, int) and self.W >= 1):
            raise ValueError(f"W (dead-end length) must be an integer >= 1, got {self.W!r}")

    @property
    def shortest_path(self) -> int:
        """Steps of the golden path: per level one exit move plus W moves to the next junction."""
        return self.K * (self.W + 1)

    def optimal_backtracking_steps(self) -> float:
        """Expected steps of the best agent without privileged knowledge of the correct exits:
        per level it tries exits in random order without repeats (on average (L-1)/2 wrong ones,
        2W steps each) and then walks the correct corridor (W+1 steps)."""
        return float(self.K * (self.L * self.W + 1))

    def restart_steps(self) -> float:
        """Expected steps of the agent that never backtracks: uniform exit choices, and at every
        dead end an immediate restart (1 step). An attempt fails at level j with probability
        p^j (1-p), p = 1/L, costing j(W+1) + W + 1 steps; it succeeds with probability p^K."""
        p = 1.0 / self.L
        s = p**self.K
        fail_cost = sum(p**j * (1 - p) * (j * (self.W + 1) + self.W + 1) for j in range(self.K))
        return fail_cost / s + self.K * (self.W + 1)


@dataclass(frozen=True)
class Maze:
    """One instance: which exit is correct at each junction."""

    spec: MazeSpec
    correct: tuple[int, ...]

    @classmethod
    def sample(cls, spec: MazeSpec, rng: np.random.Generator) -> Maze:
        return cls(spec=spec, correct=tuple(int(x) for x in rng.integers(0, spec.L, size=spec.K)))

    def golden_actions(self) -> list[str]:
        """The shortest path: at each junction the correct exit, then W forward moves."""
        out: list[str] = []
        for c in self.correct:
            out.append(exit_token(c))
            out.extend(["F"] * self.spec.W)
        return out


@dataclass
class MazeWalker:
    """A walker in one maze. Position is (k, x, d): junction k when d == 0 (x = -1), otherwise
    cell d (1..W) of exit x's corridor at junction k; k == K is the goal."""

    maze: Maze
    k: int = 0
    x: int = -1
    d: int = 0
    steps: int = 0
    restarts: int = 0
    last_exit: tuple[int, int] | None = None  # (junction, exit) of the latest exit this attempt
    dead_seen: bool = False  # the latest exit's dead end has been reached this attempt
    history: list[str] = field(default_factory=list)

    @property
    def spec(self) -> MazeSpec:
        return self.maze.spec

    @property
    def done(self) -> bool:
        return self.k == self.spec.K

    def _at_dead_end(self) -> bool:
        return self.d == self.spec.W and self.x != self.maze.correct[self.k]

    def observation(self) -> str:
        if self.done:
            return "G"
        if self.d == 0:
            return "S" if self.k == 0 else "J"
        return "D" if self._at_dead_end() else "C"

    def legal_actions(self) -> list[str]:
        return legal_actions(self.observation(), self.spec.L)

    def backward_facing(self) -> bool:
        """Whether the current decision state is backward-facing (module docstring)."""
        return self.dead_seen

    def step(self, action: str) -> str:
        """Apply a legal move; returns the new observation."""
        legal = self.legal_actions()
        if action not in legal:
            raise ValueError(f"illegal move {action!r} at observation {self.observation()!r}; allowed: {legal}")
        self.steps += 1
        self.history.append(action)
        W = self.spec.W
        if action == "R":
            self.k, self.x, self.d = 0, -1, 0
            self.restarts += 1
            self.last_exit, self.dead_seen = None, False
        elif action == "F":
            if self.d < W:
                self.d += 1
            else:  # the correct corridor's last cell leads on to the next junction (or the goal)
                self.k, self.x, self.d = self.k + 1, -1, 0
        elif action == "B":
            if self.d > 1:
                self.d -= 1
            elif self.d == 1:
                self.x, self.d = -1, 0
            else:  # back up the spine: into the correct corridor of the previous junction
                self.k -= 1
                self.x, self.d = self.maze.correct[self.k], W
        else:  # an exit
            self.x, self.d = int(action[1:]), 1
            self.last_exit, self.dead_seen = (self.k, self.x), False
        if not self.done and self.d > 0 and self._at_dead_end() and self.last_exit == (self.k, self.x):
            self.dead_seen = True
        return self.observation()


def legal_actions(obs: str, L: int) -> list[str]:
    """The moves allowed at an observation (the observation alone fixes them)."""
    exits = [exit_token(i) for i in range(L)]
    if obs == "S":
        return exits
    if obs == "J":
        return [*exits, "B"]
    if obs == "C":
        return ["F", "B"]
    if obs == "D":
        return ["B", "R"]
    if obs == "G":
        return []
    raise ValueError(f"unknown observation {obs!r}; allowed: {', '.join(OBS_TOKENS)}")
