"""specdec tuner: measure vLLM speculative-decoding configurations and pick the best one."""

__version__ = "0.1.0"
