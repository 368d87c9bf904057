"""Role-free core: config, gymnasium adapter, agent/spec construction, replay layout, health."""
