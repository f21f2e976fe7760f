"""Start-up as a newcomer meets it: every failure is one line and exit code 2, never a traceback; a
second `serve` on the same data directory is a standby with the default settings; listeners are
advertised as Kafka advertises them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.server import ServerProcess, free_port, http_get, wait_until


def run_serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`coordinator serve` that is expected to stop on its own."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "coordinator", "serve", *args], capture_output=True, text=True,
                          timeout=60, env=environ)


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert "Traceback" not in result.stderr + result.stdout
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0]
    return lines[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something else is listening on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def local(tmp_path: Path, **ports: int) -> list[str]:
    kafka = ports.get("kafka", free_port())
    metrics = ports.get("metrics", free_port())
    return ["--listen", f"127.0.0.1:{kafka}", "--metrics-listen", f"127.0.0.1:{metrics}",
            "--data-dir", str(tmp_path / "data")]


def test_a_misspelt_environment_variable_stops_start_up_naming_the_closest_key(tmp_path) -> None:
    result = run_serve(*local(tmp_path), env={"COORDINATOR_GROUP_CONSUMER_SESION_TIMEOUT_MS": "30000"})
    assert_one_line_exit_2(result, "COORDINATOR_GROUP_CONSUMER_SESION_TIMEOUT_MS",
                           "COORDINATOR_GROUP_CONSUMER_SESSION_TIMEOUT_MS", "group.consumer.session.timeout.ms")


def test_variables_of_the_admin_tools_do_not_stop_the_server(tmp_path) -> None:
    """COORDINATOR_ADMIN_BOOTSTRAP is read by `coordinator groups`, not a key: `serve` leaves it alone."""
    metrics_port = free_port()
    proc = spawn(tmp_path, ["--listen", f"127.0.0.1:{free_port()}", "--metrics-listen", f"127.0.0.1:{metrics_port}"],
                 env={"COORDINATOR_ADMIN_BOOTSTRAP": "127.0.0.1:1", "COORDINATOR_ADVERTISED_HOST": "elsewhere"})
    try:
        wait_until(lambda: _ready(metrics_port, proc), timeout=30, message="server readiness")
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_the_kafka_port_in_use_is_one_line_and_exit_2(tmp_path, busy_port: int) -> None:
    result = run_serve(*local(tmp_path, kafka=busy_port))
    assert_one_line_exit_2(result, "listeners", f"127.0.0.1:{busy_port}", "in use")


def test_a_failed_start_up_never_logs_that_the_server_stopped(tmp_path, busy_port: int) -> None:
    """It never started: `server_stopped` would tell an operator reading the logs otherwise."""
    result = run_serve(*local(tmp_path, kafka=busy_port), "--log-format", "json")
    assert_one_line_exit_2(result, "in use")
    events = [json.loads(line)["event"] for line in result.stdout.splitlines() if line.startswith("{")]
    assert "server_started" not in events
    assert "server_stopped" not in events


def test_the_metrics_port_in_use_without_an_active_owner_is_one_line_and_exit_2(tmp_path, busy_port: int) -> None:
    result = run_serve(*local(tmp_path, metrics=busy_port))
    assert_one_line_exit_2(result, "metrics.listen", f"127.0.0.1:{busy_port}", "in use")


def test_an_unresolvable_listener_host_is_one_line_and_exit_2(tmp_path) -> None:
    result = run_serve(*local(tmp_path), "--listen", "no-such-host.invalid:9092")
    assert_one_line_exit_2(result, "listeners", "no-such-host.invalid")


def test_a_data_dir_that_is_a_file_is_one_line_and_exit_2(tmp_path) -> None:
    (tmp_path / "data").write_text("not a directory")
    result = run_serve(*local(tmp_path))
    assert_one_line_exit_2(result, "log.dirs", "not a directory")


def test_a_data_dir_below_a_file_is_one_line_and_exit_2(tmp_path) -> None:
    (tmp_path / "file").write_text("")
    result = run_serve(*local(tmp_path), "--data-dir", str(tmp_path / "file" / "data"))
    assert_one_line_exit_2(result, "log.dirs", "cannot create")


def test_an_unwritable_data_dir_is_one_line_and_exit_2(tmp_path) -> None:
    if os.geteuid() == 0:
        # root writes through permission bits; /sys refuses new files even to root.
        unwritable = Path("/sys")
        try:
            (unwritable / ".probe").touch()
        except OSError:
            pass
        else:
            pytest.skip("/sys is writable here and permission bits do not stop root")
    else:
        unwritable = tmp_path / "read-only"
        unwritable.mkdir(mode=0o500)
    result = run_serve(*local(tmp_path), "--data-dir", str(unwritable))
    assert_one_line_exit_2(result, "log.dirs", "not writable")


def test_a_bad_value_is_one_line_and_exit_2(tmp_path) -> None:
    result = run_serve(*local(tmp_path), "--override", "group.max.size=lots")
    assert_one_line_exit_2(result, "group.max.size", "lots")


def test_the_wildcard_address_is_refused_as_the_advertised_address(tmp_path) -> None:
    result = run_serve(*local(tmp_path), "--listen", f"PLAINTEXT://0.0.0.0:{free_port()}")
    assert_one_line_exit_2(result, "advertised.listeners", "0.0.0.0")
    result = run_serve(*local(tmp_path), "--advertised-listener", "PLAINTEXT://0.0.0.0:9092")
    assert_one_line_exit_2(result, "advertised.listeners", "0.0.0.0")


def test_a_listener_without_a_host_binds_everywhere_and_advertises_the_host_name(tmp_path) -> None:
    """`PLAINTEXT://:PORT`, as Kafka: bound on every interface, advertised as the canonical host name."""
    host = socket.getfqdn()
    try:
        socket.getaddrinfo(host, None)
    except OSError:
        pytest.skip(f"this machine's host name {host} does not resolve")
    port, metrics_port = free_port(), free_port()
    proc = spawn(tmp_path, ["--listen", f"PLAINTEXT://:{port}", "--metrics-listen", f"127.0.0.1:{metrics_port}"])
    log_path = tmp_path / "server.log"
    try:
        wait_until(lambda: _ready(metrics_port, proc), timeout=30, message="server readiness")
        metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
        (broker,) = metadata.brokers.values()
        assert (broker.host, broker.port) == (host, port)
        # The advertised name is what the client then connects to.
        assert AdminClient({"bootstrap.servers": f"{host}:{port}"}).list_topics(timeout=10).cluster_id
        started = [json.loads(line) for line in log_path.read_text().splitlines() if '"server_started"' in line]
        assert started[0]["advertised"] == f"{host}:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def spawn(tmp_path: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`coordinator serve` left running, its output in tmp_path/server.log; `env` added to a clean one."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    environ.update(env or {})
    with open(tmp_path / "server.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "coordinator", "serve", *args, "--data-dir", str(tmp_path / "data"),
                                 "--log-format", "json"], stdout=log, stderr=subprocess.STDOUT, env=environ)


def _ready(metrics_port: int, proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:  # say why: its log is the one spawn() wrote (args[-3] is the data dir)
        log = Path(proc.args[-3]).parent / "server.log"  # type: ignore[index]
        raise AssertionError(f"the server exited with {proc.returncode}: {log.read_text()[-2000:]}")
    try:
        return http_get(metrics_port, "/readyz", timeout=0.5)[0] == 200
    except OSError:
        return False


def test_a_second_serve_on_the_same_data_dir_and_ports_is_a_standby_that_takes_over(tmp_path) -> None:
    """`./dev serve` twice: same data directory, same Kafka and metrics ports. The second waits
    (its metrics listener deferred: the active holds the port), then takes both over."""
    active = ServerProcess(tmp_path / "data").start()
    standby = ServerProcess(tmp_path / "data", port=active.port, metrics_port=active.metrics_port)
    standby.log_path = tmp_path / "standby.log"
    standby.start(wait=False)
    try:
        wait_until(lambda: "standby_waiting" in standby.log(), timeout=30, message="the standby to wait")
        wait_until(lambda: "metrics_listener_deferred" in standby.log(), timeout=10, message="metrics deferred")
        assert standby.proc is not None and standby.proc.poll() is None, standby.log()
        assert "Traceback" not in standby.log()
        active.kill()
        wait_until(lambda: "server_started" in standby.log(), timeout=30, message="the standby's takeover")
        assert http_get(active.metrics_port, "/readyz")[0] == 200
        assert AdminClient({"bootstrap.servers": active.bootstrap}).list_topics(timeout=10).topics == {}
        assert standby.terminate() == 0
    finally:
        standby.stop()
        active.stop()


def test_a_standby_with_its_own_metrics_port_is_alive_not_ready_and_stops_on_sigterm(tmp_path) -> None:
    active = ServerProcess(tmp_path / "data").start()
    standby = ServerProcess(tmp_path / "data", port=active.port)
    standby.log_path = tmp_path / "standby.log"
    standby.start(wait=False)
    try:
        wait_until(lambda: "standby_waiting" in standby.log(), timeout=30, message="the standby to wait")
        assert http_get(standby.metrics_port, "/healthz")[0] == 200
        assert http_get(standby.metrics_port, "/readyz")[0] == 503
        assert standby.terminate() == 0  # a signal stops a waiting standby too
        assert "Traceback" not in standby.log()
    finally:
        standby.stop()
        active.stop()
