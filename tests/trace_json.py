"""Real traces as the tests read them: exact decimals in, exact decimals out."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

DATA = Path(__file__).parent / "data"


def raw(name: str) -> dict:
    """``tests/data/<name>.json.gz`` as json.load reads it, floats as Decimal (a double
    would round the µs)."""
    with gzip.open(DATA / f"{name}.json.gz", "rt") as f:
        return json.load(f, parse_float=Decimal)


def dumps(doc: dict) -> str:
    """JSON text of ``doc`` with its Decimal numbers written exactly."""
    text = json.dumps(doc, default=lambda d: f"@@{d}@@")
    return re.sub(r'"@@([-0-9.eE+]+)@@"', r"\1", text)


def write_trace(path: Path, doc: dict) -> Path:
    """``doc`` written as a gzipped trace at ``path``."""
    with gzip.open(path, "wt") as f:
        f.write(dumps(doc))
    return path
