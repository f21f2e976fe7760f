"""Sidecar mode reaching its upstream over TLS and SASL with its own credentials (issue 17, point 4).

The upstream is this project's embedded server on a SASL_SSL listener with ACLs on: only the
sidecar's own user (a super user there) may do anything, so every forwarded request, the metadata
reads and the offset mirror must authenticate as the sidecar."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.interop.share_support import consume_until, share_consumer
from tests.runtime.test_startup import assert_one_line_exit_2, run_serve
from tests.security.certs import Pair
from tests.sidecar.conftest import free_base_port, sidecar_process
from tests.sidecar.support import group_offsets, produce_keyed
from tests.support.server import ServerProcess, free_port, http_get, wait_until

pytestmark = pytest.mark.interop

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture
def secured_upstream(tmp_path, certs) -> Iterator[ServerProcess]:
    data_dir = tmp_path / "upstream"
    added = subprocess.run([sys.executable, "-m", "coordinator", "scram", "add", "--data-dir", str(data_dir),
                            "SCRAM-SHA-512=[name=sidecar,password=sidecar-secret]"], capture_output=True, text=True,
                           timeout=60)
    assert added.returncode == 0, added.stderr
    server = ServerProcess(data_dir, scheme="SASL_SSL", overrides={
        "ssl.keystore.location": str(certs.server.combined), "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:sidecar", "topics": "orders:2"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _upstream_security(ca: Pair | str, password: str = "sidecar-secret") -> dict[str, str]:
    return {"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "SCRAM-SHA-512",
            "upstream.sasl.jaas.config": f'{SCRAM_MODULE} required username="sidecar" password="{password}";',
            "upstream.ssl.truststore.location": str(ca)}


def test_a_sidecar_serves_groups_in_front_of_a_sasl_ssl_upstream(tmp_path, certs, secured_upstream) -> None:
    sidecar = sidecar_process(tmp_path / "sidecar", secured_upstream.bootstrap, free_base_port(),
                              **_upstream_security(certs.ca.cert)).start()
    try:
        produce_keyed(sidecar.bootstrap, "orders", 40, idempotent=False)
        consumer = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": "billing",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe(["orders"])
            seen: list[bytes] = []

            def read_all() -> bool:
                for message in consumer.consume(50, 0.3):
                    if not message.error():
                        seen.append(message.value())
                if len(seen) >= 40:
                    consumer.commit(asynchronous=False)
                    return True
                return False

            wait_until(read_all, 60, message="40 messages through the sidecar")
            assert sorted(int(v) for v in seen) == list(range(40))
            committed = consumer.committed([TopicPartition("orders", 0), TopicPartition("orders", 1)], timeout=10)
            ends = {tp.partition: tp.offset for tp in committed}
            assert sum(ends.values()) == 40
        finally:
            consumer.close()
        # The mirror wrote the offsets upstream, authenticated as the sidecar.
        upstream_admin = AdminClient({
            "bootstrap.servers": secured_upstream.bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca.cert), "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "sidecar", "sasl.password": "sidecar-secret"})
        wait_until(lambda: group_offsets(upstream_admin, "billing", "orders", 2) == ends, 30,
                   message="offsets mirrored upstream")
    finally:
        sidecar.stop()


def test_share_groups_read_a_sasl_ssl_upstream_as_the_sidecar(tmp_path, certs, secured_upstream) -> None:
    """A share consumer through the sidecar: the records are read (Fetch, ListOffsets) from an
    upstream only the sidecar's own user may read, so over its TLS and SASL."""
    sidecar = sidecar_process(tmp_path / "sidecar", secured_upstream.bootstrap, free_base_port(),
                              **_upstream_security(certs.ca.cert), **{"share.auto.offset.reset": "earliest"}).start()
    try:
        produce_keyed(sidecar.bootstrap, "orders", 40, idempotent=False)
        consumer = share_consumer(sidecar.bootstrap, "orders", "queue")
        seen: list[tuple[int, int]] = []
        try:
            consume_until(consumer, lambda: len(seen) >= 40, seen)
            assert all(error is None for error in consumer.commit_sync().values())
        finally:
            consumer.close()
        assert len(seen) == len(set(seen)) == 40
    finally:
        sidecar.stop()


def test_a_wrong_upstream_password_keeps_the_sidecar_unready_and_says_why(tmp_path, certs, secured_upstream) -> None:
    sidecar = sidecar_process(tmp_path / "sidecar", secured_upstream.bootstrap, free_base_port(),
                              **_upstream_security(certs.ca.cert, password="wrong")).start(wait=False)
    try:
        wait_until(lambda: "SASL authentication as sidecar (SCRAM-SHA-512) failed: Authentication failed during "
                           "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512" in sidecar.log(),
                   30, message="the upstream authentication failure in the log")
        assert http_get(sidecar.metrics_port, "/readyz")[0] == 503
    finally:
        sidecar.stop()


def test_an_untrusted_upstream_certificate_is_refused(tmp_path, certs, secured_upstream) -> None:
    other_ca = certs.other_ca.cert
    sidecar = sidecar_process(tmp_path / "sidecar", secured_upstream.bootstrap, free_base_port(),
                              **_upstream_security(other_ca)).start(wait=False)
    try:
        wait_until(lambda: "CERTIFICATE_VERIFY_FAILED" in sidecar.log(), 30, message="a certificate failure logged")
    finally:
        sidecar.stop()


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"upstream.security.protocol": "SASL_SSL"}, ("upstream.security.protocol=SASL_SSL", "upstream.sasl.jaas.config")),
    ({"upstream.security.protocol": "SSL", "upstream.ssl.truststore.location": "/nowhere/ca.pem"},
     ("upstream.ssl.truststore.location", "/nowhere/ca.pem")),
    ({"upstream.security.protocol": "TLS"}, ("upstream.security.protocol",)),
])
def test_bad_upstream_security_settings_stop_start_up(tmp_path, overrides, expected) -> None:
    args = ["--listen", f"127.0.0.1:{free_port()}", "--metrics-listen", "", "--data-dir", str(tmp_path / "d"),
            "--override", f"upstream.bootstrap.servers=127.0.0.1:{free_port()}"]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    assert_one_line_exit_2(run_serve(*args), *expected)


def test_a_sidecars_own_listeners_serve_tls_and_sasl_like_its_first_listener(tmp_path, certs) -> None:
    """Clients reach the sidecar over SASL_SSL: its per-broker listeners (where Metadata sends them
    to produce) ask for the same TLS and SASL as its first listener."""
    upstream = ServerProcess(tmp_path / "plain-upstream", overrides={"topics": "orders:1"}).start()
    data_dir = tmp_path / "sidecar"
    added = subprocess.run([sys.executable, "-m", "coordinator", "scram", "add", "--data-dir", str(data_dir),
                            "SCRAM-SHA-512=[name=alice,password=alice-secret]"], capture_output=True, text=True,
                           timeout=60)
    assert added.returncode == 0, added.stderr
    sidecar = sidecar_process(data_dir, upstream.bootstrap, free_base_port(), **{
        "ssl.keystore.location": str(certs.server.combined), "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    sidecar.scheme = "SASL_SSL"
    try:
        sidecar.start()
        secure = {"bootstrap.servers": sidecar.bootstrap, "security.protocol": "SASL_SSL",
                  "ssl.ca.location": str(certs.ca.cert), "sasl.mechanisms": "SCRAM-SHA-512",
                  "sasl.username": "alice", "sasl.password": "alice-secret"}
        from confluent_kafka import Producer

        producer = Producer(secure)
        producer.produce("orders", b"through a secured sidecar")
        assert producer.flush(30) == 0
        consumer = Consumer({**secure, "group.id": "g", "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["orders"])
            message = wait_until(lambda: (m := consumer.poll(0.3)) is not None and not m.error() and m, 30,
                                 message="the message back through the sidecar")
            assert message.value() == b"through a secured sidecar"
        finally:
            consumer.close()
    finally:
        sidecar.stop()
        upstream.stop()


def test_upstream_credentials_belong_to_each_sidecar_not_to_the_process(tmp_path, certs) -> None:
    """Two sidecars in one process (tests, embedding) keep their own upstream security: building
    the second does not change how the first connects."""
    from coordinator.node.server import CoordinatorServer
    from tests.security.conftest import security_config

    secured = CoordinatorServer(security_config(tmp_path / "a", "PLAINTEXT://127.0.0.1:0", **{
        "upstream.bootstrap.servers": "127.0.0.1:1", **_upstream_security(certs.ca.cert)}))
    plain = CoordinatorServer(security_config(tmp_path / "b", "PLAINTEXT://127.0.0.1:0", **{
        "upstream.bootstrap.servers": "127.0.0.1:1"}))
    assert secured.sidecar is not None and plain.sidecar is not None
    assert secured.sidecar.security is not None and secured.sidecar.security.username == "sidecar"
    assert plain.sidecar.security is None
    assert secured.sidecar.cluster.client._security is secured.sidecar.security
