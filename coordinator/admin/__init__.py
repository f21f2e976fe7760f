"""The operator's admin CLI: `coordinator groups ...` and `coordinator offsets ...`.

It talks the Kafka protocol only, so it works against this coordinator and against any Apache Kafka
broker alike:

- `client` owns the connections: bootstrap, ApiVersions negotiation, framing, timeouts, and routing
  to the group coordinator (FindCoordinator) and partition leaders (Metadata);
- `groups` owns the group operations (list, describe with offsets and lag, delete) and returns
  plain dataclasses;
- `reset` plans and executes offsets resets with Kafka's scopes and selectors; `timespecs` parses
  their date-time and duration arguments; `log_offsets` routes ListOffsets to partition leaders;
- `assignment` decodes the embedded consumer protocol of classic consumer groups;
- `output` renders results as tables or JSON;
- `commands` wires the operations into argparse sub-commands of `coordinator`.

Nothing here is imported by the server.
"""
