"""kio has one door: only `protocol/` imports it.

The server side (`protocol.codec`) and the client side (`protocol.client`: what the sidecar, the
upstream SASL login, the admin CLI and the benchmarks send and read) are the only places that know
kio's API, so changing or replacing the codec is a change to one package. Tests may still build kio
entities directly: they are the outside client.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from protocol.build import build
from protocol.client import (
    ResponseDecodeError,
    decode_consumer_protocol,
    decode_response,
    encode_request,
    request_class,
    response_class,
)
from protocol.codec import RequestCodec, encode_response

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE_PROTOCOL = [path for folder in ("coordinator", "bench") for path in sorted((ROOT / folder).rglob("*.py"))]


def _kio_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "kio"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "kio":
            found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("kio."):
            found.append(f"{node.lineno}: {node.value!r} (a dynamic import of kio)")
    return found


def test_the_scan_sees_the_packages_it_guards() -> None:
    names = {path.relative_to(ROOT).parts[0] for path in OUTSIDE_PROTOCOL}
    assert names == {"coordinator", "bench"}
    assert len(OUTSIDE_PROTOCOL) > 100


def test_the_scan_finds_every_form_of_kio_import(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import kio\nfrom kio.serial import entity_reader\nimportlib.import_module('kio.schema.x')\n")
    assert len(_kio_imports(source)) == 3


@pytest.mark.parametrize("path", OUTSIDE_PROTOCOL, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_outside_protocol_imports_kio(path: Path) -> None:
    assert _kio_imports(path) == []


def test_a_request_the_client_side_encodes_is_what_the_server_side_decodes() -> None:
    heartbeat = build(request_class(12, 4), {"group_id": "g", "generation_id": 3, "member_id": "m",
                                             "group_instance_id": None})
    frame = encode_request(12, 77, "client-1", heartbeat)
    decoded = RequestCodec({12: (0, 4)}).decode(frame[4:])
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id, decoded.client_id) == (12, 4, 77, "client-1")
    assert decoded.body == heartbeat


def test_a_response_the_server_side_encodes_is_what_the_client_side_reads() -> None:
    response = build(response_class(12, 4), {"error_code": 27})
    correlation_id, body = decode_response(12, 4, encode_response(5, response)[4:])
    assert (correlation_id, int(body.error_code)) == (5, 27)


def test_bytes_that_are_not_the_response_are_one_error_type() -> None:
    frame = encode_response(5, build(response_class(12, 4), {"error_code": 0}))[4:]
    with pytest.raises(ResponseDecodeError, match="api 12 v4"):
        decode_response(12, 4, frame[:-3])


def test_a_consumer_protocol_version_newer_than_known_reads_as_its_known_prefix() -> None:
    # ConsumerProtocolSubscription v3: topics ["t"], no user data, no owned partitions, generation 7,
    # no rack; then the same as a "v9" with bytes appended.
    encoded = (b"\x00\x03" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff" + b"\xff\xff\xff\xff"
               + b"\x00\x00\x00\x07" + b"\xff\xff")
    assert list(decode_consumer_protocol("subscription", encoded).topics) == ["t"]
    newer = b"\x00\x09" + encoded[2:] + b"future fields"
    value = decode_consumer_protocol("subscription", newer)
    assert (list(value.topics), int(value.generation_id)) == (["t"], 7)
    with pytest.raises(ValueError, match="shorter than its version"):
        decode_consumer_protocol("assignment", b"\x00")
