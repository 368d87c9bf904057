"""Model: the agent, its Q-network and the policies that run it, in TensorFlow or mirrored in numpy.

- `agent.py`: the DqnAgent and its counters (`AgentBundle`).
- `networks.py`: the Q-network of a config and an observation spec (MLP, conv, LSTM; input scaling inside).
- `branching.py`: the branching Q-network, agent and policies of several action dimensions (Tavakoli et al. 2018).
- `actions.py`: greedy, max, taken and random actions with an optional mask; `ValidActions`, where the mask sits.
- `collect_policy.py`: the actor's policy, one object whatever runs it; `graph_policy.py` the graph calls,
  `numpy_policy.py` the numpy mirror of plain MLPs, `exploration.py` held random actions.
- `schedules.py`: epsilon and other linear schedules over train steps.
- `flat_weights.py`, `graph_io.py`: weights and batches across the Python<->TF boundary without kept tensors.
- `policy_export.py`: greedy SavedModels, and playing one on new episodes.

Only `exploration.py` is imported by the settings' checks, so it imports nothing but numpy.
"""
