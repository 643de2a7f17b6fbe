"""The version of wattcap, written into every file it saves."""

__version__ = "0.1.0"
