"""How values users hand over are read as the numbers Ajax's fields hold: text from YAML 1.1
and command lines (``1e-3``), NumPy scalars (``np.linspace``'s values) and whole floats
(``1e6`` steps), and the YAML or JSON files that hold them. A leaf module, so that every
layer can read values alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def as_number(text: str, kind: type) -> int | float | None:
    """``text`` as a number, as YAML 1.1 and command lines hand numbers over as text
    (``1e-3``, ``1e6``, ``100_000``): an int where ``kind`` is int and the number is whole,
    else a float; None where it is no number."""
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if kind is int and number.is_integer() else number


def as_plain(value: Any) -> Any:
    """A NumPy scalar as the Python number or bool it holds (a value of ``np.linspace``, say);
    any other value as it is."""
    return value.item() if isinstance(value, np.generic) else value


def as_whole(value: Any) -> int | None:
    """``value`` as an int where it is a whole number (an int, a NumPy integer, a whole float
    such as ``1e6``); None where it is not (a bool, a fraction, text, infinity)."""
    value = as_plain(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, float) and value.is_integer() else None


def as_text(value: Any) -> str:
    """``value`` as a label shows it: a float to 4 significant digits (an Optuna trial's
    ``0.0002314575594054932`` reads ``0.0002315``), anything else as ``str`` writes it."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def read_mapping(path: str | Path, holds: str) -> dict[str, Any]:
    """The mapping a YAML file (JSON for a ``.json`` one) holds; ValueError naming the file
    where it does not parse or holds no mapping of ``holds``; OSError where it cannot be
    read."""
    import yaml

    path = str(path)
    kind = "JSON" if path.endswith(".json") else "YAML"
    if Path(path).is_dir():
        raise ValueError(f"{path} is a directory; give the {kind} file of {holds}.")
    text = Path(path).read_text()
    try:
        data = json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ValueError(f"{path} is not valid {kind}: {error}") from error
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of {holds}, got {type(data).__name__}.")
    return data
