"""Certificates made by the test itself with the `openssl` command line (the `cryptography` package
is not a dependency): a CA, a server certificate for 127.0.0.1/localhost, client certificates.

Keys are EC P-256 (fast to make). Everything lands in one directory per test session.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Pair:
    key: Path
    cert: Path

    @property
    def combined(self) -> Path:
        """Key and certificate in one PEM file (Kafka's PEM `ssl.keystore.location`)."""
        path = self.cert.with_suffix(".keystore.pem")
        if not path.exists():
            path.write_text(self.key.read_text() + self.cert.read_text())
        return path


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)} failed: {result.stderr}")


def _key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=path.parent)


class Authority:
    """A throw-away certificate authority."""

    def __init__(self, directory: Path, name: str = "test-ca") -> None:
        if shutil.which("openssl") is None:
            pytest.skip("the openssl command line is needed to make test certificates")
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = directory / f"{name}.key"
        self.cert = directory / f"{name}.pem"
        _key(self.key)
        _openssl("req", "-x509", "-new", "-key", str(self.key), "-sha256", "-days", "2", "-subj", f"/CN={name}",
                 "-out", str(self.cert), cwd=directory)

    def issue(self, name: str, subject: str, hosts: tuple[str, ...] = ()) -> Pair:
        key = self.directory / f"{name}.key"
        csr = self.directory / f"{name}.csr"
        cert = self.directory / f"{name}.pem"
        _key(key)
        _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr), cwd=self.directory)
        extensions = self.directory / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment"]
        if hosts:
            names = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() else f"DNS:{h}" for h in hosts)
            lines += [f"subjectAltName={names}", "extendedKeyUsage=serverAuth"]
        else:
            lines.append("extendedKeyUsage=clientAuth")
        extensions.write_text("\n".join(lines) + "\n")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.key), "-CAcreateserial",
                 "-days", "2", "-sha256", "-extfile", str(extensions), "-out", str(cert), cwd=self.directory)
        return Pair(key, cert)
