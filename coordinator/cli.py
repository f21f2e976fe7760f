"""Command line: `coordinator serve` and the operator sub-commands.

`serve` resolves the configuration (see `coordinator.config`), configures logging, and runs the
server on uvloop until SIGTERM/SIGINT; with `coordinator.shards` above 1 it runs the shard
supervisor instead (`coordinator/node/supervisor.py`), which starts each shard as
`serve <the same arguments> --shard K`. Configuration problems and every other start-up failure (a
port in use, a data directory that is not a writable directory) exit with code 2 and one line on
stderr naming the key; never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .config import KEYS, ConfigError, env_name, resolve


def _keys_epilog() -> str:
    width = max(len(k) for k in KEYS)
    lines = ["configuration keys (default; environment variable COORDINATOR_<KEY>):"]
    for key in KEYS.values():
        lines.append(f"  {key.name:<{width}}  = {key.default!s:<28} {key.doc}")
    lines.append("")
    lines.append(f"example: {env_name('group.consumer.session.timeout.ms')}=30000 coordinator serve")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coordinator", description="Kafka-protocol group coordinator.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the coordinator",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_keys_epilog(),
    )
    serve.add_argument("--listen", metavar="HOST:PORT", help="Kafka listener (key listeners)")
    serve.add_argument("--advertised-listener", metavar="HOST:PORT", help="address told to clients (key advertised.listeners)")
    serve.add_argument("--data-dir", metavar="DIR", help="data directory (key log.dirs)")
    serve.add_argument("--metrics-listen", metavar="HOST:PORT", help="metrics HTTP listener (key metrics.listen)")
    serve.add_argument("--config", metavar="FILE", type=Path, help="Kafka-style key=value properties file")
    serve.add_argument("--override", metavar="KEY=VALUE", action="append", default=[], help="set a key (repeatable)")
    serve.add_argument("--shard", type=int, metavar="K", help=argparse.SUPPRESS)  # a supervisor's child
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--log-format", default="auto", choices=["auto", "json", "console"])
    from .admin.commands import add_commands
    from .history.cli import add_commands as add_history_commands
    from .logtool import add_commands as add_log_commands
    from .security.cli import add_commands as add_scram_commands

    add_commands(commands)
    add_history_commands(commands)
    add_log_commands(commands)
    add_scram_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(raw)
    if args.command == "serve":
        return _serve(args, raw)
    if args.command == "log":
        from .logtool import run as run_log

        return run_log(args)
    if args.command == "scram":
        from .security.cli import run as run_scram

        return run_scram(args)
    if args.command == "history":
        from .history.cli import run as run_history

        return run_history(args)
    from .admin.commands import COMMANDS, run

    if args.command in COMMANDS:
        return run(args)
    return 2


def _serve(args: argparse.Namespace, argv: list[str]) -> int:
    """`argv` is the command line as given: the shard supervisor starts each shard with it."""
    try:
        config = resolve(
            config_file=args.config,
            overrides=args.override,
            flags={
                "listeners": args.listen,
                "advertised.listeners": args.advertised_listener,
                "log.dirs": args.data_dir,
                "metrics.listen": args.metrics_listen,
            },
        )
    except ConfigError as exc:
        print(f"coordinator: configuration error: {exc}", file=sys.stderr)
        return 2
    from . import logging as coordinator_logging

    coordinator_logging.configure(args.log_level, None if args.log_format == "auto" else args.log_format == "json")
    import uvloop

    from .node.serve import serve
    from .node.supervisor import lay_out_single_process, supervise
    from .runtime.startup_checks import StartupError
    from .shards.placement import LayoutError, ShardLayout

    try:
        if args.shard is None:
            layout = ShardLayout(config["offsets.topic.num.partitions"], config["coordinator.shards"])
            if layout.shards > 1:  # the supervisor takes its lock, lays the directory out, starts the shards
                return uvloop.run(supervise(config, layout, argv))
            lay_out_single_process(config.data_dir, layout)
        return uvloop.run(serve(config, args.shard))
    except LayoutError as exc:
        print(f"coordinator: cannot start: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"coordinator: cannot start: log.dirs {config['log.dirs']}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"coordinator: cannot start: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
