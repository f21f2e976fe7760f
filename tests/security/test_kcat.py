"""kcat 1.7.1 (Debian 12's, on librdkafka 2.0.2) over SASL: it logs in only where the broker
advertises SaslHandshake v0, as Kafka 4.0 does. With PLAIN over SASL_PLAINTEXT and SASL_SSL it
produces, then consumes back what it produced. Its SCRAM is refused, as Kafka 4.0 refuses it:
librdkafka before 2.6.1 repeats the client nonce in its final message, and the nonce must match."""

from __future__ import annotations

import shutil
import subprocess
import sys
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
               "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret", *extra, *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)


def _produce_and_consume(server: ServerProcess, extra: list[str]) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    produced = _kcat(server, extra, "-P", "-t", topic, stdin="first\nsecond\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat(server, extra, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e", "-q", "-f", "%s\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["first", "second"]
    assert "authentication_failed" not in server.log()


def _server(tmp_path, certs, scheme: str, mechanism: str) -> tuple[ServerProcess, list[str]]:
    """A started server with `mechanism` on a `scheme` listener where carol/carol-secret may log
    in, and the kcat options that reach it."""
    data_dir = tmp_path / "data"
    overrides = {"sasl.enabled.mechanisms": mechanism}
    if mechanism == "PLAIN":
        overrides[f"listener.name.{scheme.lower()}.plain.sasl.jaas.config"] = USERS
    else:
        added = subprocess.run([sys.executable, "-m", "coordinator", "scram", "add", "--data-dir", str(data_dir),
                                f"{mechanism}=[name=carol,password=carol-secret]"],
                               capture_output=True, text=True, timeout=60)
        assert added.returncode == 0, added.stderr
    extra = ["-X", f"sasl.mechanisms={mechanism}"]
    if scheme == "SASL_SSL":
        overrides["ssl.keystore.location"] = str(certs.server.combined)
        extra += ["-X", f"ssl.ca.location={certs.ca.cert}"]
    return ServerProcess(data_dir, scheme=scheme, overrides=overrides).start(), extra


@pytest.mark.parametrize("scheme", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kcat_logs_in_with_plain_then_produces_and_consumes(tmp_path, certs, scheme) -> None:
    server, extra = _server(tmp_path, certs, scheme, "PLAIN")
    try:
        _produce_and_consume(server, extra)
    finally:
        server.stop()


def test_kcat_scram_is_refused_for_its_repeated_nonce_as_kafka_4_refuses_it(tmp_path, certs) -> None:
    server, extra = _server(tmp_path, certs, "SASL_SSL", "SCRAM-SHA-512")
    try:
        produced = _kcat(server, extra, "-P", "-t", "refused", stdin="never\n")
        assert produced.returncode != 0
        assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
               "SCRAM-SHA-512" in produced.stderr
        assert "Invalid client nonce in the final client message." in server.log()
    finally:
        server.stop()
