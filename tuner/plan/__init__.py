"""Planning a study: the space of configurations, the options and study file read once, and the
preflight checks that refuse bad input before any server starts."""
