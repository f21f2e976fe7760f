"""`coordinator scram add`: SCRAM users written into a stopped coordinator's log, before it starts.

The first user of a SASL-only coordinator cannot be created through AlterUserScramCredentials
(nobody can authenticate yet), so, like Kafka's `kafka-storage format --add-scram`, this writes the
credential record straight into the data directory's record log:

    coordinator scram add --data-dir ./data 'SCRAM-SHA-512=[name=admin,password=admin-secret]'

Each argument is Kafka's `MECHANISM=[name=NAME,password=PASSWORD(,iterations=N)]` (iterations 4096
by default, 4096..16384). The password never reaches the disk: a random salt, StoredKey and
ServerKey do, as AlterUserScramCredentials would write them. The command takes the data-directory
lock and refuses while a server holds it (use AlterUserScramCredentials then, e.g.
`kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users --entity-name NAME`).
Exit code 0 on success, 1 when the directory is in use or the log cannot be written, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from ..core.record_codec import Record
from ..recordlog import LogRecord, RealFileSystem, RecordLog, try_lock_data_dir
from ..recordlog.errors import RecordLogError
from . import scram
from .records import CODEC, ScramCredentialKey, ScramCredentialValue

_SPEC = re.compile(r"(?P<mechanism>[A-Z0-9-]+)=\[(?P<options>.*)\]")


class SpecError(ValueError):
    pass


def add_commands(commands: Any) -> None:
    tool = commands.add_parser("scram", help="manage SCRAM users of a stopped coordinator")
    actions = tool.add_subparsers(dest="scram_command", required=True)
    add = actions.add_parser("add", help="add or replace SCRAM credentials before the server starts")
    add.add_argument("--data-dir", required=True, type=Path)
    add.add_argument("credentials", nargs="+", metavar="'MECHANISM=[name=N,password=P]'")


def parse_spec(text: str) -> tuple[str, scram.ScramMechanism, str, int]:
    """Kafka's --add-scram syntax -> (user, mechanism, password, iterations)."""
    match = _SPEC.fullmatch(text.strip())
    if match is None:
        raise SpecError(f"expected MECHANISM=[name=NAME,password=PASSWORD], got {text!r}")
    mechanism = scram.BY_NAME.get(match.group("mechanism"))
    if mechanism is None:
        raise SpecError(f"unknown SCRAM mechanism {match.group('mechanism')} "
                        f"(one of {', '.join(scram.BY_NAME)})")
    options: dict[str, str] = {}
    for item in match.group("options").split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise SpecError(f"expected key=value in {text!r}, got {item!r}")
        options[key.strip()] = value.strip().strip('"')
    unknown = sorted(set(options) - {"name", "password", "iterations"})
    if unknown:
        raise SpecError(f"unknown option {', '.join(unknown)} in {text!r}")
    if not options.get("name") or not options.get("password"):
        raise SpecError(f"name and password are required in {text!r}")
    text_iterations = options.get("iterations", str(scram.MIN_ITERATIONS))
    iterations = int(text_iterations) if text_iterations.isdigit() else -1
    if not scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS:
        raise SpecError(f"iterations must be between {scram.MIN_ITERATIONS} and {scram.MAX_ITERATIONS}")
    return options["name"], mechanism, options["password"], iterations


def run(args: argparse.Namespace) -> int:
    try:
        users = [parse_spec(spec) for spec in args.credentials]
    except SpecError as exc:
        print(f"coordinator scram: {exc}", file=sys.stderr)
        return 2
    return add_users(args.data_dir, users)


def add_users(data_dir: Path, users: list[tuple[str, scram.ScramMechanism, str, int]]) -> int:
    fs = RealFileSystem()
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = try_lock_data_dir(fs, str(data_dir))
    if lock is None:
        print(f"coordinator scram: {data_dir} is in use by a running coordinator; stop it first, or use "
              "AlterUserScramCredentials (kafka-configs --alter --entity-type users)", file=sys.stderr)
        return 1
    try:
        records: list[LogRecord] = []
        for user, mechanism, password, iterations in users:
            credential = scram.new_credential(mechanism, password, iterations)
            record = Record(ScramCredentialKey(user, mechanism.type_id), ScramCredentialValue(
                credential.salt, credential.stored_key, credential.server_key, credential.iterations))
            records.append(LogRecord(*CODEC.encode_record(record)))
        log = RecordLog.open(fs, str(data_dir / "log"))
        try:
            log.append(records, int(time.time() * 1000))
        finally:
            log.close()  # writes and fsyncs
    except (OSError, RecordLogError) as exc:
        print(f"coordinator scram: cannot write the log in {data_dir}: {exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    for user, mechanism, _, iterations in users:
        print(f"added {mechanism.name} credential for user {user} ({iterations} iterations)")
    return 0
