"""Logging: the config, the writer thread and its sinks."""

from ajax.logging.config import LoggingConfig
from ajax.logging.writer import (
    LogWriter,
    RunDirectoryTaken,
    refuse_a_taken_directory,
    run_directory,
)

__all__ = [
    "LogWriter",
    "LoggingConfig",
    "RunDirectoryTaken",
    "refuse_a_taken_directory",
    "run_directory",
]
