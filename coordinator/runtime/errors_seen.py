"""Finds the error codes a response carries, for the per-error-code metric.

Per response class a plan of where `error_code` fields live (top level and inside nested arrays) is
computed once; walking it costs one attribute read for a Heartbeat. A response encoded straight from
its description (`EncodedResponse`) is read from the description: `error_code` keys at the top and
in nested lists of mappings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import cache
from typing import Any, cast, get_args, get_origin

from kio.schema.errors import ErrorCode

from protocol.codec import EncodedResponse

Plan = tuple[tuple[str, "Plan | None"], ...]


def _unwrap(tp: Any) -> Any:
    args = [a for a in get_args(tp) if a is not type(None)]
    return args[0] if get_origin(tp) is not tuple and args and len(get_args(tp)) == 2 else tp


@cache
def _plan(cls: Any) -> Plan:
    steps: list[tuple[str, Plan | None]] = []
    for field in dataclasses.fields(cls):
        if field.name == "error_code":
            steps.append((field.name, None))
            continue
        tp = _unwrap(field.type)
        if get_origin(tp) is tuple:
            inner = _unwrap(get_args(tp)[0])
            if dataclasses.is_dataclass(inner):
                sub = _plan(cast(Any, inner))
                if sub:
                    steps.append((field.name, sub))
    return tuple(steps)


def _walk(entity: Any, plan: Plan) -> Iterator[Any]:
    for name, sub in plan:
        value = getattr(entity, name)
        if sub is None:
            if value:
                yield value
        elif value:
            for item in value:
                yield from _walk(item, sub)


def _walk_description(description: Any) -> Iterator[int]:
    for key, value in description.items():
        if key == "error_code":
            if value:
                yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, dict):
                    yield from _walk_description(item)


@cache
def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def error_names(response: Any) -> Iterator[str]:
    """Names of the non-zero error codes in a response (lower-case, as kio names them)."""
    if response.__class__ is EncodedResponse:
        codes: Iterator[Any] = _walk_description(response.description)
    else:
        codes = _walk(response, _plan(response.__class__))
    for code in codes:
        yield _name(int(code))
