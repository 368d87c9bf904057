"""Policy weights between the learner and the readers (actors, evaluator) through the `variables` table.

- `wire.py`: the item's format, `publish_weights` and `sample_weights`.
- `flat.py`: `FlatWeights`, the graph read/assign of a model's variables.
- `publisher.py`: `WeightsPublisher` (learner).
- `puller.py`: `WeightsPuller` and `fetch_weights` (actors, evaluator, `dqn-service status`).
Remote calls run under a deadline (dqn/deadline.py).
"""
