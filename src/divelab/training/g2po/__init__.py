"""Group-Graph Policy Optimization for Long-Horizon Agentic Reinforcement Learning (G2PO), arXiv 2606.22995.

G2PO merges identical observations across the G rollouts of a task into one state-transition
graph and gives every state the mean outcome of all trajectories through it, V(s) (here, by
default, their mean discounted return from s). Each step is an edge with TD error
r + gamma V(s') - V(s), standardised over the whole graph, so a good move inside a failed run still
gets positive credit. The paper reports +22 points over GRPO on ALFWorld,
about +14 on WebShop, a gain under 3 points on AppWorld (where states rarely repeat), and
bookkeeping under 0.5% of compute.

The estimator itself lives in the shared engine (``divelab.rl.advantages``, key ``"g2po"``);
this package holds the reproduction and the verl/SkyRL adapter re-export.
"""

from divelab.rl.advantages import build_group_graph, g2po_advantage

__all__ = ["build_group_graph", "g2po_advantage"]
