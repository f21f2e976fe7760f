"""The `coordinator groups ...` and `coordinator offsets ...` sub-commands.

    coordinator groups list                   [--bootstrap HOST:PORT] [--json] [--timeout S: the whole command]
    coordinator groups describe GROUP         [...]
    coordinator groups delete GROUP           [...]
    coordinator offsets reset GROUP (--all-topics | --topic T[:P,...] ...) SELECTOR [--dry-run | --execute]
    coordinator offsets delete GROUP --topic T [--topic T ...]   (share groups)

`offsets reset` is Kafka's `kafka-consumer-groups --reset-offsets`: it prints the plan (GROUP TOPIC
PARTITION NEW-OFFSET) and changes nothing unless `--execute` is given (`--dry-run`, the default, may
be said explicitly). SELECTOR is one of Kafka's: --to-earliest, --to-latest, --to-offset N,
--to-current, --shift-by N, --to-datetime YYYY-MM-DDTHH:mm:SS.sss, --by-duration PnDTnHnMnS.

Share groups (KIP-932) are listed with type `share`; `groups describe` shows their members, each
partition's start offset, log end, lag and what is in flight by state; `offsets reset` resets their
start offsets as `kafka-share-groups.sh --reset-offsets` does (an Empty group; no `--shift-by`), and
`offsets delete` is its `--delete-offsets --topic`: the group forgets those topics, so its next
consumer starts them where `share.auto.offset.reset` says.

`--bootstrap` defaults to $COORDINATOR_ADMIN_BOOTSTRAP, then 127.0.0.1:9092. Exit codes: 0 done, 1 the
operation failed or was refused (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from ..pipes import to_stdout
from . import groups, reset, share, timespecs
from .client import AdminClient, AdminError
from .output import partitions_text, table, to_json

T = TypeVar("T")
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
                        help="time the whole command may take (default: %(default)s)")

    group_parser = commands.add_parser("groups", help="list, describe and delete groups")
    group_actions = group_parser.add_subparsers(dest="action", required=True)
    group_actions.add_parser("list", parents=[common], help="every group with its type and state")
    describe = group_actions.add_parser("describe", parents=[common],
                                        help="members, assignments, committed offsets and lag")
    describe.add_argument("group")
    delete = group_actions.add_parser("delete", parents=[common], help="delete an empty group and its offsets")
    delete.add_argument("group")

    offsets_parser = commands.add_parser("offsets", help="reset a group's committed offsets, delete a share group's")
    offset_actions = offsets_parser.add_subparsers(dest="action", required=True)
    reset_parser = offset_actions.add_parser(
        "reset", parents=[common],
        help="plan (and with --execute commit) new offsets for an inactive (Empty or Dead) group",
        description="Plan new committed offsets for an inactive (Empty or Dead) group, as Kafka's "
                    "kafka-consumer-groups --reset-offsets. Nothing changes without --execute.")
    reset_parser.add_argument("group")
    scope = reset_parser.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", type=_topic_scope, metavar="TOPIC[:P,P...]",
                       help="a topic, or some of its partitions as topic:0,1,2 (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has a committed offset for")
    target = reset_parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the earliest offset of each partition")
    target.add_argument("--to-latest", action="store_true", help="the end offset of each partition")
    target.add_argument("--to-offset", type=int, metavar="N",
                        help="offset N, clamped to each partition's earliest..latest")
    target.add_argument("--to-current", action="store_true",
                        help="the committed offset (the end offset where none is committed)")
    target.add_argument("--shift-by", type=int, metavar="N",
                        help="the committed offset plus N (may be negative), clamped to earliest..latest")
    target.add_argument("--to-datetime", type=_datetime, metavar="YYYY-MM-DDTHH:mm:SS.sss",
                        help="the first offset at or after this time (UTC unless a zone such as +02:00 "
                             "or Z follows)")
    target.add_argument("--by-duration", type=_duration, metavar="PnDTnHnMnS",
                        help="the first offset at or after now minus this ISO-8601 duration, e.g. PT1H30M")
    mode = reset_parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the planned offsets")
    delete_offsets = offset_actions.add_parser(
        "delete", parents=[common], help="forget an empty share group's offsets of whole topics",
        description="Delete an empty share group's state of whole topics, as Kafka's kafka-share-groups "
                    "--delete-offsets: its next consumer starts them by share.auto.offset.reset.")
    delete_offsets.add_argument("group")
    delete_offsets.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                                help="a topic (repeatable)")


def _argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a parser that raises ValueError with a message for the user."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return convert


_topic_scope = _argument(reset.parse_topic_scope)
_datetime = _argument(timespecs.parse_datetime)
_duration = _argument(timespecs.parse_duration_ns)


@dataclass(frozen=True, slots=True)
class Reply:
    out: str
    """What goes to stdout."""
    notes: tuple[str, ...] = ()
    """Warnings and hints for stderr (stdout stays parseable)."""


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run an admin sub-command; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    handler = _HANDLERS[(args.command, args.action)]
    try:
        result = asyncio.run(_with_client(args, handler))
    except AdminError as exc:
        print(f"coordinator: error: {exc}", file=err)
        return 1
    reply = result if isinstance(result, Reply) else Reply(result)
    for note in reply.notes:
        print(f"coordinator: {note}", file=err)
    if out is sys.stdout:
        return to_stdout(lambda: _print(reply.out, out))
    return _print(reply.out, out)


def _print(text: str, out: TextIO) -> int:
    print(text, file=out)
    return 0


async def _with_client(args: argparse.Namespace, handler: Handler) -> str | Reply:
    """`--timeout` bounds the whole command, not only each request: a silent broker would otherwise
    cost one timeout per request (ApiVersions alone is tried twice, v3 then v0)."""
    try:
        async with asyncio.timeout(args.timeout):
            async with AdminClient(args.bootstrap, timeout=args.timeout) as client:
                return await handler(client, args)
    except TimeoutError as exc:
        raise AdminError(f"timed out after {args.timeout:g}s (--timeout bounds the whole command)") from exc


async def _list(client: AdminClient, args: argparse.Namespace) -> str:
    listing = await groups.list_groups(client)
    if args.json:
        return to_json(listing)
    return table(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
                 [[g.group_id, g.group_type, g.state, g.protocol_type] for g in listing])


async def _describe(client: AdminClient, args: argparse.Namespace) -> str:
    description = await share.describe_share_group(client, args.group) or await groups.describe_group(
        client, args.group)
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
    elif description.group_type == "share":
        head.append(f"GROUP-EPOCH {description.group_epoch}  ASSIGNMENT-EPOCH {description.assignment_epoch}  "
                    f"ASSIGNOR {description.protocol or '-'}")
        members = table(
            ["MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT"],
            [[m.member_id, m.client_id, m.client_host, m.member_epoch, partitions_text(m.assignment)]
             for m in description.members])
        states = ("available", "acquired", "acknowledged", "archived")
        partitions = table(
            ["TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG", *(s.upper() for s in states), "MEMBERS"],
            [[o.topic, o.partition, o.start_offset, o.end_offset, o.lag,
              *(None if o.in_flight is None else o.in_flight.get(s, 0) for s in states), ",".join(o.members)]
             for o in description.share_offsets])
        return "\n".join([*head, "", members, "", partitions])
    elif description.group_type == "streams":
        head.append(f"GROUP-EPOCH {description.group_epoch}  ASSIGNMENT-EPOCH {description.assignment_epoch}")
        members = table(
            ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "EPOCH", "ACTIVE", "STANDBY", "WARMUP", "TASK-LAGS"],
            [[m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_epoch,
              partitions_text(m.assignment), partitions_text(m.standby_tasks), partitions_text(m.warmup_tasks),
              " ".join(f"{task}:{lag}" for task, lag in sorted(m.task_lags.items()))] for m in description.members])
    else:
        generation = "" if description.generation_id is None else f"  GENERATION {description.generation_id}"
        head.append(f"PROTOCOL-TYPE {description.protocol_type or '-'}  PROTOCOL {description.protocol or '-'}"
                    + generation)
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


def _selector(args: argparse.Namespace) -> reset.Selector:
    if args.to_earliest:
        return reset.Selector("earliest")
    if args.to_latest:
        return reset.Selector("latest")
    if args.to_current:
        return reset.Selector("current")
    if args.to_offset is not None:
        return reset.Selector("offset", args.to_offset)
    if args.shift_by is not None:
        return reset.Selector("shift", args.shift_by)
    if args.to_datetime is not None:
        return reset.Selector("timestamp", args.to_datetime)
    # --by-duration is measured from now, when the command runs, as Kafka does.
    return reset.Selector("timestamp", timespecs.timestamp_before(time.time_ns(), args.by_duration))


async def _reset(client: AdminClient, args: argparse.Namespace) -> Reply:
    scope = reset.Scope(all_topics=args.all_topics, topics=tuple(args.topic or ()))
    plan = await reset.plan_reset(client, args.group, scope, _selector(args))
    if args.execute:
        await reset.execute_plan(client, plan)
    notes = list(plan.warnings)
    if not plan.changes:
        notes.append(f"nothing to reset: group {args.group!r} has no committed offsets"
                     if args.all_topics else "nothing to reset")
    if not plan.executed:
        notes.append("dry run: nothing was committed; add --execute to commit these offsets")
    if args.json:
        return Reply(to_json(plan), tuple(notes))
    return Reply(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                       [[plan.group_id, c.topic, c.partition, c.new_offset] for c in plan.changes]), tuple(notes))


async def _delete_offsets(client: AdminClient, args: argparse.Namespace) -> str:
    results = await share.delete_offsets(client, args.group, list(dict.fromkeys(args.topic)))
    if args.json:
        return to_json({"group_id": args.group, "topics": results})
    failed = [f"{t} ({e})" for t, e in results.items() if e is not None]
    if failed:
        done = [t for t, e in results.items() if e is None]
        raise AdminError(f"cannot delete the offsets of group {args.group!r} for {', '.join(failed)}"
                         + (f" (deleted for {', '.join(done)})" if done else ""))
    return table(["TOPIC", "STATUS"], [[t, "Successful"] for t in results])


Handler = Callable[[AdminClient, argparse.Namespace], Awaitable[str | Reply]]
"""A sub-command: its stdout text, or a Reply when it also has notes for stderr."""

_HANDLERS: dict[tuple[str, str], Handler] = {
    ("groups", "list"): _list,
    ("groups", "describe"): _describe,
    ("groups", "delete"): _delete,
    ("offsets", "reset"): _reset,
    ("offsets", "delete"): _delete_offsets,
}
