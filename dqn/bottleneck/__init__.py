"""The bottleneck verdict: which part limits a run now, from what the roles report through the replay server.

- `reports.py`: a role's report (cumulative counters, its process's CPU and its machine), how one from the network
  is checked before it is used, and the per-role windows of rates computed from two reports.
- `verdict.py`: `judge`, the pure function from those windows to the verdict: the part, the evidence, the change
  that would move it and the capacity figures.
"""
