"""The SDK's version (pyproject.toml reads it from here), reported in the registry of live workers."""

__version__ = "0.1.0"
