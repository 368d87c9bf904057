"""Replay server role: Reverb tables with checkpointing, health and clean shutdown."""
