"""The engine: speculative configs and the vLLM server process that runs them."""

from tuner.engine.server import ServerOptions, VllmServer, default_server_cmd
from tuner.engine.spec_config import METHODS, SpecConfig

__all__ = ["METHODS", "ServerOptions", "SpecConfig", "VllmServer", "default_server_cmd"]
