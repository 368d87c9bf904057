"""The only package that knows every role: the dqn-service CLI, the local launcher, status."""
