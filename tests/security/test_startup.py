"""A security configuration the server cannot serve stops start-up with one line and exit code 2."""

from __future__ import annotations

import pytest

from tests.runtime.test_startup import assert_one_line_exit_2, run_serve
from tests.support.server import free_port


def serve(tmp_path, listeners: str, *overrides: str):
    args = ["--listen", listeners, "--metrics-listen", "", "--data-dir", str(tmp_path / "data")]
    for item in overrides:
        args += ["--override", item]
    return run_serve(*args)


def test_a_missing_key_file_names_the_key(tmp_path) -> None:
    result = serve(tmp_path, f"SSL://127.0.0.1:{free_port()}", f"ssl.keystore.location={tmp_path}/nope.pem")
    assert_one_line_exit_2(result, "ssl.keystore.location", "nope.pem", "No such file")


def test_an_ssl_listener_without_key_material_is_refused(tmp_path) -> None:
    result = serve(tmp_path, f"SSL://127.0.0.1:{free_port()}")
    assert_one_line_exit_2(result, "listener SSL", "ssl.keystore.location")


def test_a_file_that_is_not_pem_key_material_is_refused(tmp_path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key\n")
    result = serve(tmp_path, f"SSL://127.0.0.1:{free_port()}", f"ssl.keystore.location={junk}")
    assert_one_line_exit_2(result, "ssl.keystore.location", "junk.pem")


@pytest.mark.parametrize(("listeners", "overrides", "expected"), [
    ("CLIENT://127.0.0.1:{p}", (), ("listener.security.protocol.map", "CLIENT")),
    ("SSL://127.0.0.1:{p}", ("ssl.keystore.type=JKS",), ("ssl.keystore.type", "PEM")),
    ("SASL_SSL://127.0.0.1:{p}", ("sasl.enabled.mechanisms=GSSAPI",), ("sasl.enabled.mechanisms", "GSSAPI")),
    ("PLAINTEXT://127.0.0.1:{p},SSL://127.0.0.1:{p}", (), ("listeners", "different port")),
    ("PLAINTEXT://127.0.0.1:{p}", ("listener.security.protocol.map=PLAINTEXT:TLS",), ("listener.security.protocol.map", "TLS")),
    ("PLAINTEXT://127.0.0.1:{p}", ("listener.name.ssl.ssl.keystore.location=/x",), ("listener.name.ssl", "no listener named SSL")),
    ("SASL_PLAINTEXT://127.0.0.1:{p}", ("sasl.enabled.mechanisms=PLAIN",), ("plain.sasl.jaas.config", "PLAIN")),
    ("SASL_PLAINTEXT://127.0.0.1:{p}", ("sasl.enabled.mechanisms=PLAIN", "sasl.jaas.config=nonsense"), ("jaas", "expected")),
    ("PLAINTEXT://127.0.0.1:{p}", ("authorizer.class.name=com.example.Mine",), ("authorizer.class.name",)),
    ("PLAINTEXT://127.0.0.1:{p}", ("super.users=alice",), ("super.users", "User:alice")),
])
def test_bad_security_settings_are_one_line_and_exit_2(tmp_path, listeners, overrides, expected) -> None:
    result = serve(tmp_path, listeners.format(p=free_port()), *overrides)
    assert_one_line_exit_2(result, *expected)
