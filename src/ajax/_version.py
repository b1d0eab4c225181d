"""Ajax's version: the package's (pyproject.toml reads it from here) and the one
``TrainResult.save`` records."""

__version__ = "0.1.0"
