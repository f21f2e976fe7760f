"""Finds the error codes a response carries, for the per-error-code metric.

Per response schema a plan of where `error_code` fields live (top level and inside nested arrays) is
computed once; walking it costs one attribute read (or one `dict.get`) for a Heartbeat, and a
response without errors yields the shared empty tuple (no generator, no list). A response encoded
straight from its description (`EncodedResponse`) is walked with the plan of its API version's
schema: a description uses the schema's field names.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any, cast, get_args, get_origin

from protocol.codec import EncodedResponse
from protocol.errors import ErrorCode
from protocol.schemas import response_schema

Plan = tuple[tuple[str, "Plan | None"], ...]

_NONE: tuple[str, ...] = ()


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


_TOP_LEVEL: Plan = (("error_code", None),)
"""The plan of a response whose only error code is its top-level one (Heartbeat, ...)."""

_DESCRIPTION_PLANS: dict[tuple[int, int], Plan] = {}


def _description_plan(key: tuple[int, int]) -> Plan:
    plan = _plan(response_schema(*key))
    plan = _DESCRIPTION_PLANS[key] = _TOP_LEVEL if plan == _TOP_LEVEL else plan
    return plan


def _collect(entity: Any, plan: Plan, described: bool, names: list[str]) -> None:
    for name, sub in plan:
        value = entity.get(name) if described else getattr(entity, name)
        if not value:
            continue
        if sub is None:
            names.append(_name(int(value)))
        else:
            for item in value:
                _collect(item, sub, described, names)


@cache
def _name(code: int) -> str:
    try:
        return ErrorCode(code).name.lower()  # the metric's label values are lower-case
    except ValueError:
        return str(code)


def error_names(response: Any) -> tuple[str, ...] | list[str]:
    """Names of the non-zero error codes in a response (lower-case)."""
    if response.__class__ is EncodedResponse:
        entity: Any = response.description
        plan = _DESCRIPTION_PLANS.get(response.key)
        if plan is None:  # first response of this API version
            plan = _description_plan(response.key)
        if plan is _TOP_LEVEL:  # the hot responses: one `get`
            code = entity.get("error_code")
            return (_name(int(code)),) if code else _NONE
        described = True
    else:
        entity = response
        plan = _plan(response.__class__)
        described = False
    names: list[str] = []
    _collect(entity, plan, described, names)
    return names or _NONE
