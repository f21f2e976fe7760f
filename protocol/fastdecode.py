"""Direct decoding of the hot requests: the request header read by hand, the body by kio's native reader.

For the requests a coordinator receives most — Heartbeat, ConsumerGroupHeartbeat, OffsetCommit,
and a share group member's ShareFetch — the
codec's general path spent more on what surrounds kio's body reader than on the reader itself: a
request-header entity built only for its client id, the cached look-up of the (key, version) plan,
and `guard.check`, which parses the header a second time before walking the body. Measured under
valgrind on this machine's interpreter, per steady Heartbeat v4: the header reader 4,200
instructions, the plan look-up 1,500, `guard.check` 2,100, the body reader 4,200.

So these decoders, one per (key, version), read the client id straight from the frame, hand the
body's offset to the guard's walker when the request has arrays (the same memory check as
`guard.check`, without its second header parse) and call kio's native body reader: the same entity,
from the same reader. A steady ConsumerGroupHeartbeat (both arrays null) is recognised from its
tail and not walked: the walk cost more than kio's read of the body, and such a frame has no count
to refuse. Decoding the body with `struct` in Python was tried first and was slower than
kio's native reader (27,200 against 14,900 instructions per Heartbeat v4 decode: each Python-level
read and each slot set of the frozen entity costs more than kio's whole body): see BENCHMARKS.md.

They read only what they are sure of. A client id that is null or of 256 bytes or more, tagged
fields in the header, a frame that ends early, anything kio's reader refuses, and a Heartbeat frame
big enough to hold a string over 32,767 bytes return None: the codec then decodes the frame on its
general path, which decides every refusal (Heartbeat has no array, so the guard's check of what
Kafka's parsers refuse, string lengths included, runs on that path for the frames that need it). `tests/protocol/test_fastdecode.py` proves with Hypothesis, for every version
covered, that random valid requests decode equal on both paths and that random truncations and
corruptions get the same outcome (the same request, or a refusal).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, get_args, get_origin

from kio.serial import entity_reader

from . import guard
from .errors import ProtocolError
from .guard import Walker
from .schemas import request_schema

MAX_STRING_LENGTH = 0x7FFF
"""The longest string Kafka's readers accept: a frame that could hold a longer one takes the general
path, whose guard refuses it."""

CONSUMER_GROUP_HEARTBEAT = 68

Decoded = tuple[str, Any]
"""The header's client id and the body entity."""
Decoder = Callable[[bytes], Decoded | None]


def _has_array(schema: Any) -> bool:
    return any(get_origin(tp) is tuple or any(get_origin(a) is tuple for a in get_args(tp))
               for tp in (spec.type for spec in dataclasses.fields(schema)))


def _steady_or_walked(version: int, walk: Walker) -> Walker:
    """ConsumerGroupHeartbeat's memory check. A steady heartbeat (nothing changed since the last
    one: instance and rack ids, subscription, regex, assignor and owned partitions all null) has
    both its arrays null and its two strings under 127 bytes: nothing for the guard to refuse, seen
    from the frame's tail without walking it (the walk costs more than kio's read of the body).
    Any other frame is walked."""
    tail = bytes(5 if version >= 1 else 4)  # names, (regex,) assignor, owned partitions: null; no tags

    def check(d: bytes, start: int) -> int:
        b = d[start]
        if b < 0x80:  # group id: a one-byte length
            p = start + (b or 1)
            b = d[p]
            if b < 0x80:  # member id too, then the member epoch
                p += (b or 1) + 4
                if d[p:p + 2] == _TWO_NULLS and d[p + 6:] == tail:  # instance, rack; timeout; the rest
                    return p
        return walk(d, start)

    return check


_TWO_NULLS = bytes(2)


def _decoder(api_key: int, version: int) -> Decoder:
    schema = request_schema(api_key, version)
    flexible = bool(schema.__flexible__)
    read_body = entity_reader(schema)
    # The guard's memory check where the request has arrays; Heartbeat has none, and only a frame
    # too big for the string rule goes through the guard (on the general path).
    walk = guard.walker(api_key, version) if _has_array(schema) else None
    if walk is not None and api_key == CONSUMER_GROUP_HEARTBEAT:
        walk = _steady_or_walked(version, walk)

    def decode(d: bytes) -> Decoded | None:
        # Request header v1/v2 after key, version, correlation id: client id (INT16 length), then
        # tagged fields (none expected) in flexible versions.
        try:
            if d[8]:  # null (-1), or 256 bytes or more: the general path
                return None
            p = 10 + d[9]
            client_id = d[10:p].decode()
            if flexible:
                if d[p]:
                    return None
                p += 1
            if walk is None:
                if len(d) > MAX_STRING_LENGTH:
                    return None
            else:
                walk(d, p)
            body, _ = read_body(d, p)
        except ProtocolError:
            raise  # the guard's refusal
        except Exception:  # an early end, bad UTF-8, whatever kio refuses: the general path says it
            return None
        return client_id, body

    return decode


def _table() -> dict[tuple[int, int], Decoder]:
    table: dict[tuple[int, int], Decoder] = {}
    for version in range(5):
        table[(12, version)] = _decoder(12, version)
    for version in (0, 1):
        table[(68, version)] = _decoder(68, version)
    for version in range(2, 11):
        table[(8, version)] = _decoder(8, version)
    for version in (1, 2):
        table[(78, version)] = _decoder(78, version)
    return table


DECODERS: dict[tuple[int, int], Decoder] = _table()
"""(api_key, api_version) -> decoder of a whole frame (header included, size prefix excluded) into
(client id, kio request entity), or None: the codec's general path decodes it."""
