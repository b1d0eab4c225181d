"""Logging: the config, the writer thread and its sinks."""

from ajax.logging.config import LoggingConfig
from ajax.logging.writer import LogWriter, run_directory

__all__ = ["LogWriter", "LoggingConfig", "run_directory"]
