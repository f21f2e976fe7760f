"""Errors raised by the wire layer.

Every failure to turn bytes into a request is one of these; the connection that sent the bytes is
closed with one log line naming the error. Nothing else may escape the decoder.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A request that cannot be served; the connection that sent it is closed."""

    reason: str = "protocol_error"


class FrameTooLarge(ProtocolError):
    reason = "frame_too_large"


class InvalidFrame(ProtocolError):
    reason = "invalid_frame"


class UnknownApiKey(ProtocolError):
    reason = "unknown_api_key"


class UnsupportedVersion(ProtocolError):
    reason = "unsupported_version"


class MalformedRequest(ProtocolError):
    reason = "malformed_request"
