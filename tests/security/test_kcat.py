"""kcat 1.7.1 (Debian 12's, on librdkafka 2.0.2) over SASL PLAIN: it logs in only where the broker
advertises SaslHandshake v0, as Kafka 4.0 does. Produces over SASL_PLAINTEXT and SASL_SSL, and
consumes back what it produced."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from coordinator.security.jaas import PLAIN_MODULE
from tests.support.server import ServerProcess

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = [pytest.mark.interop,
              pytest.mark.skipif(KCAT is None, reason="kcat is not installed (Debian: apt-get install kcat)")]

USERS = f'{PLAIN_MODULE} required user_carol="carol-secret";'


def _kcat(server: ServerProcess, extra: list[str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    assert KCAT is not None
    command = [KCAT, "-b", server.bootstrap, "-X", f"security.protocol={server.scheme}",
               "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret",
               *extra, *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)


def _produce_and_consume(server: ServerProcess, extra: list[str]) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    produced = _kcat(server, extra, "-P", "-t", topic, stdin="first\nsecond\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat(server, extra, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e", "-q", "-f", "%s\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["first", "second"]
    assert "authentication_failed" not in server.log()


@pytest.mark.parametrize("scheme", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kcat_logs_in_with_plain_then_produces_and_consumes(tmp_path, certs, scheme) -> None:
    prefix = f"listener.name.{scheme.lower()}."
    overrides = {"sasl.enabled.mechanisms": "PLAIN", f"{prefix}plain.sasl.jaas.config": USERS}
    extra: list[str] = []
    if scheme == "SASL_SSL":
        overrides["ssl.keystore.location"] = str(certs.server.combined)
        extra = ["-X", f"ssl.ca.location={certs.ca.cert}"]
    server = ServerProcess(tmp_path / "data", scheme=scheme, overrides=overrides)
    server.start()
    try:
        _produce_and_consume(server, extra)
    finally:
        server.stop()
