"""The one JAAS line Kafka's `sasl.jaas.config` holds: `<LoginModule class> <flag> key="value" ...;`.

Only what this server reads is interpreted: `PlainLoginModule`'s `user_<name>="<password>"` options
(the PLAIN users a listener accepts, Kafka's broker-side convention) and the `username`/`password`
options of `PlainLoginModule` or `ScramLoginModule` (the sidecar's own credentials upstream). Values
may be double-quoted (with backslash escapes) or bare words; the line ends with `;`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<word>[^\s=";]+)|(?P<eq>=)|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<end>;))')


class JaasError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's `user_<name>="<password>"` options: the users PLAIN accepts."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def parse(text: str) -> JaasEntry:
    """One login module entry; JaasError with a one-line reason when it is not one."""
    tokens: list[tuple[str, str]] = []
    position = 0
    stripped = text.strip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            raise JaasError(f"cannot parse JAAS configuration near {stripped[position:position + 20]!r}")
        position = match.end()
        if match.group("word") is not None:
            tokens.append(("word", match.group("word")))
        elif match.group("eq") is not None:
            tokens.append(("eq", "="))
        elif match.group("quoted") is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match.group("quoted"))))
        else:
            tokens.append(("end", ";"))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word" or tokens[-1][0] != "end":
        raise JaasError("expected '<LoginModule> <flag> key=\"value\" ...;'")
    module, flag = tokens[0][1], tokens[1][1]
    if flag not in _FLAGS:
        raise JaasError(f"login module flag must be one of {', '.join(_FLAGS)}, got {flag!r}")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3:
        raise JaasError("options must be key=value pairs")
    for index in range(0, len(body), 3):
        key, eq, value = body[index:index + 3]
        if key[0] != "word" or eq[0] != "eq" or value[0] not in ("word", "value"):
            raise JaasError("options must be key=value pairs")
        options[key[1]] = value[1]
    return JaasEntry(module, flag, options)
