"""`tuner serve` settings, one typed object (``ServeSettings``): flag, else environment variable
(TUNER_*), else the config file's [serve] table, else the default. The command's flags are made
from its fields (``serve_options``), so a setting is declared once, here.

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

import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from tuner.errors import UsageError

ENV_PREFIX = "TUNER_"


class ServeSettings(BaseSettings):
    """Each field is a flag (--drift-margin), an environment variable (TUNER_DRIFT_MARGIN, or the
    alias given) and a [serve] key (drift_margin); the description is the flag's help."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, populate_by_name=True,
                                      extra="forbid", frozen=True)

    config: Optional[Path] = Field(None, description="TOML file with a [serve] table.")
    db: Optional[str] = Field(None, description="Results database URL.")
    host: str = Field("127.0.0.1", description="Dashboard address (default 127.0.0.1).")
    port: int = Field(8080, description="Dashboard port (default 8080).")
    token: Optional[str] = Field(None, validation_alias="TUNER_DASHBOARD_TOKEN",
                                 description="Operator token that allows starting runs from the dashboard.")
    prometheus: Optional[str] = Field(
        None, validation_alias="TUNER_PROMETHEUS_URL",
        description="Prometheus that scrapes the production vLLM servers: enables the drift check.")
    drift_margin: float = Field(0.15, description="Fraction below the tuned acceptance that counts as drift "
                                                  "(default 0.15).")
    drift_for: float = Field(600.0, description="Seconds the drift must last before a re-tune (default 600).")
    drift_every: float = Field(60.0, description="Seconds between drift checks (default 60).")
    drift_window: float = Field(300.0, description="Seconds of counters each check looks at (PromQL increase "
                                                   "window, default 300).")
    log_dir: Path = Field(Path(".tuner/jobs"), description="Where job logs go (default .tuner/jobs).")

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings):
        return init_settings, env_settings, _ConfigFile(settings_cls)

    @classmethod
    def load(cls, given: dict[str, Any] | None = None) -> ServeSettings:
        """The settings, ``given`` (flags; None where not given) over the environment over the
        config file over the defaults; a bad value is refused in one sentence."""
        try:
            return cls(**{k: v for k, v in (given or {}).items() if v is not None})
        except ValidationError as exc:
            error = exc.errors()[0]
            key = str(error["loc"][0]) if error["loc"] else "?"
            key = next((name for name, f in cls.model_fields.items() if f.validation_alias == key), key)
            kind = "a number" if cls.model_fields.get(key) and cls.model_fields[key].annotation in (int, float) \
                else "a valid value"
            raise UsageError(f"serve setting {key} = {error.get('input')!r} must be {kind}") from None

    @model_validator(mode="after")
    def _check(self) -> ServeSettings:
        for key in ("drift_margin", "drift_for", "drift_every", "drift_window"):
            if not math.isfinite(getattr(self, key)):
                raise UsageError(f"serve setting {key} = {getattr(self, key)!r} must be a finite number")
        if not 1 <= self.port <= 65535:
            raise UsageError(f"serve setting port = {self.port} must be a port number from 1 to 65535")
        if self.prometheus is not None and not self.prometheus.startswith(("http://", "https://")):
            raise UsageError(f"serve setting prometheus = {self.prometheus!r} must be an http(s) URL "
                             "like http://prometheus:9090")
        if not 0 < self.drift_margin < 1:
            raise UsageError(f"drift margin {self.drift_margin} must be a fraction between 0 and 1, like 0.15")
        for key in ("drift_for", "drift_every", "drift_window"):
            value = getattr(self, key)
            if value < 0 or (key != "drift_for" and value == 0):
                raise UsageError(f"serve setting {key} = {value} must be a positive number of seconds")
        return self


FILE_KEYS = [name for name in ServeSettings.model_fields if name != "config"]


def env_name(name: str) -> str:
    """The environment variable of a setting."""
    return ServeSettings.model_fields[name].validation_alias or ENV_PREFIX + name.upper()


def load_config(path: Path | None) -> dict[str, Any]:
    """The [serve] table of the config file (nothing without one); unknown keys are refused."""
    if path is None:
        return {}
    from tuner.plan.study_plan import read_toml  # optuna and the rest of planning: only with a file

    data = read_toml(path, "no such config file; fix --config or TUNER_CONFIG")
    unknown = set(data) - {"serve"} or set(data.get("serve", {})) - set(FILE_KEYS)
    if unknown:
        raise UsageError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; the [serve] table "
                         f"takes {', '.join(FILE_KEYS)}")
    return data.get("serve", {})


class _ConfigFile(PydanticBaseSettingsSource):
    """The config file named by the sources above it (--config, TUNER_CONFIG), below them."""

    def get_field_value(self, field, field_name):
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = self.current_state.get("config")
        fields = self.settings_cls.model_fields
        # Keyed as the sources above key them (an alias where there is one), so that they win.
        return {fields[key].validation_alias or key: value
                for key, value in load_config(Path(path) if path else None).items()}


def serve_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command(**given)`` with one typer option per setting (--drift-margin, read from
    TUNER_DRIFT_MARGIN too, None where neither is set), for ``ServeSettings.load(given)``."""
    import typer

    parameters = []
    for name, field in ServeSettings.model_fields.items():
        base = field.annotation
        base = next((a for a in getattr(base, "__args__", ()) if a is not type(None)), base)
        option = typer.Option(None, f"--{name.replace('_', '-')}", envvar=env_name(name), show_envvar=True,
                              help=field.description)
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                            annotation=Optional[base]))
    command.__signature__ = inspect.Signature(parameters, return_annotation=None)
    return command
