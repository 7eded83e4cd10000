"""Reading what an export drew from its SVG: matplotlib's file, with the ids engine/export/drawing.py gives.

Each drawn element is a group with the id ``<figure>/<kind>/<name>``: kind is
series, errors, bar, mark, lane or interval (name ``<device>/<kind>``).
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def drawn(root: ET.Element, kind: str) -> dict[str, ET.Element]:
    """The groups drawn for ``kind``, by the rest of their id, in drawing order."""
    out = {}
    for g in root.iter(f"{SVG}g"):
        parts = (g.get("id") or "").split("/", 2)
        if len(parts) == 3 and parts[1] == kind:
            out[parts[2]] = g
    return out


def points(curve: ET.Element) -> int:
    """The vertices of a drawn curve's path (gaps split it into several moves)."""
    d = next(curve.iter(f"{SVG}path")).get("d")
    return d.count("M") + d.count("L")


def fill(group: ET.Element) -> str:
    """The fill colour of a group's first shape (a bar's)."""
    return re.search(r"fill: (#[0-9a-f]{6})", next(group.iter(f"{SVG}path")).get("style")).group(1)


def texts(root: ET.Element) -> list[str]:
    """Every text drawn (the exports keep text as text), in drawing order."""
    return [t.text for t in root.iter(f"{SVG}text")]
