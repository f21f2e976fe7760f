"""A private API declared from outside `protocol/` (`protocol.private.declare`): decoded and named
like any other, and refused in one line where it would clash with Kafka's keys or another API's."""

from __future__ import annotations

import pytest

from protocol.private import DESCRIBE_GROUP_GENERATIONS, NAMES, PrivateApiError, declare
from protocol.schemas import api_name, api_snake_name, request_schema, response_schema
from tests.core.toy.plugin import TOY_JOIN, ToyJoinRequestV0, ToyJoinResponseV0


def test_a_declared_private_api_is_found_by_the_codec_tables_and_named() -> None:
    assert request_schema(TOY_JOIN, 0) is ToyJoinRequestV0
    assert response_schema(TOY_JOIN, 0) is ToyJoinResponseV0
    assert (api_name(TOY_JOIN), api_snake_name(TOY_JOIN)) == ("ToyJoin", "toy_join")
    declare(TOY_JOIN, "ToyJoin", "toy_join", {0: ToyJoinRequestV0}, {0: ToyJoinResponseV0})  # again: a no-op


@pytest.mark.parametrize(("key", "says"), [
    (11, "private api Clash: key 11 is not in 16384..32767"),
    (TOY_JOIN, "private api Clash: key 30000 is already ToyJoin"),
    (DESCRIBE_GROUP_GENERATIONS, "private api Clash: key 32767 is already DescribeGroupGenerations"),
])
def test_a_key_of_kafka_or_of_another_private_api_is_refused(key: int, says: str) -> None:
    before = dict(NAMES)
    with pytest.raises(PrivateApiError, match=f"^{says}$"):
        declare(key, "Clash", "clash", {0: ToyJoinRequestV0}, {0: ToyJoinResponseV0})
    assert before == NAMES
