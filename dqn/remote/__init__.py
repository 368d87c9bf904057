"""Remote calls to the replay server, each under a deadline (Reverb 0.14 puts none on insert or sample).

- `deadline.py`: `DeadlineCaller`, a call on a worker thread that the caller abandons at its deadline.
- `connection.py`: `RemoteConnection`, one address's client for a worker loop: deadline, reconnect, throttled warnings.
- `replay_client.py`: waiting for the servers (replay data, control tables), `server_info`, the check that their
  tables match the settings.
- `latest_item.py`: reading a table that holds only its newest item, downloading only what changed.
- `weights_wire.py`, `weights_publisher.py`, `weights_puller.py`: policy weights learner -> actors, evaluator.
- `reset_requests.py`: the evaluator's requests for a fresh start, to the learner.
"""
