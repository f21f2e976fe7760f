"""The `coordinator groups ...` and `coordinator offsets ...` sub-commands.

    coordinator groups list                   [--bootstrap HOST:PORT] [--json] [--timeout S]
    coordinator groups describe GROUP         [...]
    coordinator groups delete GROUP           [...]
    coordinator offsets reset GROUP --topic T (--to-earliest | --to-latest | --to-offset N) [--dry-run]

`--bootstrap` defaults to $COORDINATOR_ADMIN_BOOTSTRAP, then 127.0.0.1:9092. Exit codes: 0 done, 1 the
operation failed or was refused (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from . import groups
from .client import AdminClient, AdminError
from .output import partitions_text, table, to_json

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
COMMANDS = ("groups", "offsets")


def add_commands(commands: Any) -> None:
    """Add the `groups` and `offsets` sub-commands to the `coordinator` sub-parsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", metavar="HOST:PORT[,...]",
                        default=os.environ.get("COORDINATOR_ADMIN_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                        help="any coordinator or Kafka broker (default: $COORDINATOR_ADMIN_BOOTSTRAP or %(default)s)")
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="per-request timeout (default: %(default)s)")

    group_parser = commands.add_parser("groups", help="list, describe and delete groups")
    group_actions = group_parser.add_subparsers(dest="action", required=True)
    group_actions.add_parser("list", parents=[common], help="every group with its type and state")
    describe = group_actions.add_parser("describe", parents=[common],
                                        help="members, assignments, committed offsets and lag")
    describe.add_argument("group")
    delete = group_actions.add_parser("delete", parents=[common], help="delete an empty group and its offsets")
    delete.add_argument("group")

    offsets_parser = commands.add_parser("offsets", help="reset a group's committed offsets")
    offset_actions = offsets_parser.add_subparsers(dest="action", required=True)
    reset = offset_actions.add_parser("reset", parents=[common],
                                      help="reset committed offsets of an inactive (Empty or Dead) group")
    reset.add_argument("group")
    reset.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                       help="topic whose partitions are reset (repeatable)")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the earliest offset of each partition")
    target.add_argument("--to-latest", action="store_true", help="the end offset of each partition")
    target.add_argument("--to-offset", type=int, metavar="N",
                        help="offset N, clamped to each partition's earliest..latest")
    reset.add_argument("--dry-run", action="store_true", help="show the new offsets without committing them")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run an admin sub-command; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    handler = _HANDLERS[(args.command, args.action)]
    try:
        text = asyncio.run(_with_client(args, handler))
    except AdminError as exc:
        print(f"coordinator: error: {exc}", file=err)
        return 1
    print(text, file=out)
    return 0


async def _with_client(args: argparse.Namespace,
                       handler: Callable[[AdminClient, argparse.Namespace], Awaitable[str]]) -> str:
    async with AdminClient(args.bootstrap, timeout=args.timeout) as client:
        return await handler(client, args)


async def _list(client: AdminClient, args: argparse.Namespace) -> str:
    listing = await groups.list_groups(client)
    if args.json:
        return to_json(listing)
    return table(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
                 [[g.group_id, g.group_type, g.state, g.protocol_type] for g in listing])


async def _describe(client: AdminClient, args: argparse.Namespace) -> str:
    description = await groups.describe_group(client, args.group)
    if description.state == "Dead" and not description.offsets:
        raise AdminError(f"group {args.group!r} does not exist")
    if args.json:
        return to_json(description)
    head = [
        f"GROUP {description.group_id}  TYPE {description.group_type or '-'}  STATE {description.state}  "
        f"COORDINATOR {description.coordinator}",
    ]
    if description.group_type == "consumer":
        head.append(f"GROUP-EPOCH {description.group_epoch}  ASSIGNMENT-EPOCH {description.assignment_epoch}  "
                    f"ASSIGNOR {description.protocol or '-'}")
        members = table(
            ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT", "TARGET-ASSIGNMENT"],
            [[m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_epoch,
              partitions_text(m.assignment), partitions_text(m.target_assignment)] for m in description.members])
    else:
        head.append(f"PROTOCOL-TYPE {description.protocol_type or '-'}  PROTOCOL {description.protocol or '-'}")
        members = table(
            ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "GENERATION", "ASSIGNMENT"],
            [[m.member_id, m.group_instance_id, m.client_id, m.client_host, m.generation_id,
              partitions_text(m.assignment)] for m in description.members])
    offsets = table(
        ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"],
        [[o.topic, o.partition, o.committed_offset, o.end_offset, o.lag, o.member_id]
         for o in description.offsets])
    return "\n".join([*head, "", members, "", offsets])


async def _delete(client: AdminClient, args: argparse.Namespace) -> str:
    await groups.delete_group(client, args.group)
    if args.json:
        return to_json({"group_id": args.group, "deleted": True})
    return f"Deletion of group {args.group!r} succeeded."


async def _reset(client: AdminClient, args: argparse.Namespace) -> str:
    target: groups.ResetTarget = "earliest" if args.to_earliest else "latest" if args.to_latest else "offset"
    result = await groups.reset_offsets(client, args.group, args.topic, target, args.to_offset,
                                        execute=not args.dry_run)
    if args.json:
        return to_json(result)
    return table(["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"],
                 [[result.group_id, c.topic, c.partition, c.previous_offset, c.new_offset]
                  for c in result.changes]) + ("" if result.executed else "\n(dry run: nothing committed)")


_HANDLERS: dict[tuple[str, str], Callable[[AdminClient, argparse.Namespace], Awaitable[str]]] = {
    ("groups", "list"): _list,
    ("groups", "describe"): _describe,
    ("groups", "delete"): _delete,
    ("offsets", "reset"): _reset,
}
