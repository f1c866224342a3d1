"""`tuner serve` settings: flag, else environment variable (TUNER_*), else the config file's
[serve] table, else the default.

```toml
[serve]
db = "sqlite:////data/tuner.db"
host = "127.0.0.1"
port = 8080
token = "..."                 # lets the dashboard start runs
prometheus = "http://prometheus:9090"
drift_margin = 0.15           # live acceptance this far below the tuned one ...
drift_for = 600               # ... at every check for this many seconds triggers a re-tune
drift_every = 60
drift_window = 300            # PromQL increase() window
log_dir = "/data/jobs"
```
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tuner.errors import UsageError
from tuner.plan.study_plan import read_toml

DEFAULTS: dict[str, Any] = {
    "db": None, "host": "127.0.0.1", "port": 8080, "token": None, "prometheus": None,
    "drift_margin": 0.15, "drift_for": 600.0, "drift_every": 60.0, "drift_window": 300.0,
    "log_dir": ".tuner/jobs",
}
TYPES = {"port": int, "drift_margin": float, "drift_for": float, "drift_every": float, "drift_window": float}


def load_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    data = read_toml(path, "no such config file; fix --config or TUNER_CONFIG")
    unknown = set(data) - {"serve"} or set(data.get("serve", {})) - set(DEFAULTS)
    if unknown:
        raise UsageError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; the [serve] table "
                         f"takes {', '.join(DEFAULTS)}")
    return data.get("serve", {})


def resolve(given: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``given``: flags and environment variables (None where neither was set)."""
    settings = {}
    for key, default in DEFAULTS.items():
        value = given.get(key)
        if value is None:
            value = config.get(key, default)
        if value is not None and key in TYPES:
            try:
                value = TYPES[key](value)
            except (TypeError, ValueError):
                raise UsageError(f"serve setting {key} = {value!r} must be a number") from None
            if not math.isfinite(value):
                raise UsageError(f"serve setting {key} = {value!r} must be a finite number")
        settings[key] = value
    if not 1 <= settings["port"] <= 65535:
        raise UsageError(f"serve setting port = {settings['port']} must be a port number from 1 to 65535")
    if settings["prometheus"] is not None and not str(settings["prometheus"]).startswith(("http://", "https://")):
        raise UsageError(f"serve setting prometheus = {settings['prometheus']!r} must be an http(s) URL "
                         "like http://prometheus:9090")
    if not 0 < settings["drift_margin"] < 1:
        raise UsageError(f"drift margin {settings['drift_margin']} must be a fraction between 0 and 1, like 0.15")
    for key in ("drift_for", "drift_every", "drift_window"):
        if settings[key] < 0 or (key != "drift_for" and settings[key] == 0):
            raise UsageError(f"serve setting {key} = {settings[key]} must be a positive number of seconds")
    return settings
