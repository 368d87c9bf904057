"""Process plumbing every role shares: signals and threads, health service, progress files, summaries.

- `runtime.py`: logging, clean-stop signals, thread limits, port checks, heap trimming.
- `health.py`: the grpc.health.v1 service each role serves.
- `progress.py`: episode statistics and the small `progress.json` files `local` and `status` read.
- `summaries.py`: TensorBoard scalars in one graph call per set of names.
"""
