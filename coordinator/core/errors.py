"""The exception the core raises for protocol-level failures, and Kafka's error codes.

`ErrorCode` is declared once, in `protocol.errors` (standard library only, so importing it keeps
the core pure); it is re-exported here so that core modules name it from inside the core.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

__all__ = ["CoordinatorError", "ErrorCode"]


class CoordinatorError(Exception):
    """A request failed with a Kafka error code.

    Raised by validation inside the core; :meth:`CoordinatorShard.handle` catches it and answers the
    request with ``code`` in the shape that request's response uses. It never escapes ``handle``.
    """

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
