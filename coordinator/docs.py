"""Generated documentation: the supported-API table and the configuration reference.

Both are produced from the registries the server itself uses (the API registry and `config.KEYS`),
and `python -m coordinator.docs` rewrites the marked sections of README.md; a test fails when the
README is stale.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from .config import reference_table, resolve

README = Path(__file__).resolve().parent.parent / "README.md"


def api_table() -> str:
    from .runtime.server import CoordinatorServer

    with tempfile.TemporaryDirectory() as tmp:
        config = resolve(environ={}, flags={"log.dirs": tmp})
        server = CoordinatorServer(config)
        lines = ["| API | key | versions |", "|---|---|---|"]
        for handler in server.registry:
            lines.append(f"| {handler.name} | {handler.api_key} | {handler.min_version}–{handler.max_version} |")
    return "\n".join(lines)


SECTIONS = {"apis": api_table, "config": reference_table}


def render(text: str) -> str:
    for name, produce in SECTIONS.items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n)(?:.*?\n)?(<!-- {name}:end -->)", re.S)
        body = produce() + "\n"
        text = pattern.sub(lambda m: f"{m.group(1)}{body}{m.group(2)}", text)  # noqa: B023 - used at once
    return text


def main() -> int:
    text = README.read_text()
    updated = render(text)
    if updated != text:
        README.write_text(updated)
        print("README.md updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
