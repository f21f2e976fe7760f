"""README.md's fenced blocks, read from README itself so an edit to README is what gets tested.

A block is a shell block (```sh: commands), a Python block (```python: a snippet run with
`./dev python -`), a file (any other fence directly after a line that is just `` `NAME`: ``, such as
`secure.properties`), or text (a diagram, an example of output: nothing to run).

A block may be preceded by one HTML comment that tells the README test what a reader would do
around it (comments do not show in the rendered README):

- `<!-- readme-test: skip: REASON -->`: the block cannot run on a test machine (placeholder hosts,
  an hour of CPU); the test reports the reason.
- `<!-- readme-test: needs ./dev serve -->`: the prose says a server is running; the test starts one
  (`./dev serve`) unless a block of the same section already did.
- `<!-- readme-test: until "REGEX" -->`: every command of the block runs until stopped (a consumer
  in its own terminal); each is started in the background and is ready once its output matches
  REGEX; Ctrl-C (SIGINT) stops it when the section ends.

Everything else is worked out from the commands themselves: a `serve` command is a server (started
in the background, ready when /readyz says so, SIGTERM at the end of its section), a command of a
tool the machine lacks (openssl, docker, Java for Spark) skips with the reason, and the Spark
pipeline's commands are slow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

MARKER = re.compile(r"^<!--\s*readme-test:\s*(?P<body>.*?)\s*-->$")
FILE_NAME = re.compile(r"^`(?P<name>[^`\s]+)`:$")
UNTIL = re.compile(r'^until\s+"(?P<regex>.+)"$')
SKIP = re.compile(r"^skip:\s*(?P<reason>.+)$")
NEEDS_SERVER = "needs ./dev serve"


class ReadmeError(ValueError):
    """README has a block or a marker the test does not understand."""


@dataclass(frozen=True)
class Block:
    index: int
    line: int  # of the opening fence, 1-based
    section: str  # the heading the block is under
    kind: str  # "sh", "python", "file" or "text"
    text: str
    file_name: str | None = None
    skip: str | None = None
    until: str | None = None
    needs_server: bool = False
    commands: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")[:40]
        return f"{self.index:02d}-{slug}"

    @property
    def runs(self) -> bool:
        return self.kind != "text"


def commands_of(script: str) -> tuple[str, ...]:
    """A shell block's commands: continuation lines joined, blank and comment-only lines dropped."""
    commands: list[str] = []
    pending = ""
    for raw in script.splitlines():
        line = pending + raw
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            commands.append(line.strip())
    if pending.strip():
        commands.append(pending.strip())
    return tuple(commands)


def _marker(body: str) -> dict[str, object]:
    if body == NEEDS_SERVER:
        return {"needs_server": True}
    if match := UNTIL.match(body):
        re.compile(match["regex"])
        return {"until": match["regex"]}
    if match := SKIP.match(body):
        return {"skip": match["reason"]}
    raise ReadmeError(f"unknown readme-test marker {body!r}")


def parse(text: str) -> list[Block]:
    lines = text.splitlines()
    blocks: list[Block] = []
    section = "(top)"
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        if not line.startswith("```"):
            i += 1
            continue
        language = line[3:].strip()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ReadmeError(f"README.md:{i + 1}: a fence that is never closed")
        body = "\n".join(lines[i + 1:end]) + "\n"
        before = [lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()][:2]
        options: dict[str, object] = {}
        if before and (match := MARKER.match(before[0].strip())):
            options = _marker(match["body"])
            before = before[1:]
        named = FILE_NAME.match(before[0].strip()) if before else None
        if language in ("sh", "bash", "shell"):
            kind, commands = "sh", commands_of(body)
        elif language == "python":
            kind, commands = "python", ()
        elif named:
            kind, commands = "file", ()
        else:
            kind, commands = "text", ()
        blocks.append(Block(
            index=len(blocks), line=i + 1, section=section, kind=kind, text=body,
            file_name=named["name"] if named and kind == "file" else None, commands=commands,
            skip=options.get("skip"), until=options.get("until"),  # type: ignore[arg-type]
            needs_server=bool(options.get("needs_server")),
        ))
        i = end + 1
    return blocks


def readme_blocks(path: Path = README) -> list[Block]:
    return parse(path.read_text())
