"""TLS contexts from Kafka's PEM settings, and the principal of a client certificate.

Key material is PEM only (`ssl.keystore.type=PEM`, `ssl.truststore.type=PEM`), given as files
(`ssl.keystore.location`: the private key and its certificate chain in one file;
`ssl.truststore.location`: CA certificates) or inline (`ssl.keystore.key` with
`ssl.keystore.certificate.chain`, `ssl.truststore.certificates`), as Kafka reads PEM. An encrypted
key takes `ssl.key.password`. Anything missing or unreadable raises `TlsConfigError` with one line
naming the key; the server turns it into exit code 2.

`ssl.client.auth`: `required` refuses a handshake without a certificate the trust store vouches
for, `requested` checks one if sent, `none` never asks.

Principal (Kafka's DefaultKafkaPrincipalBuilder with the DEFAULT `ssl.principal.mapping.rules`):
`User:` + the certificate subject's distinguished name in RFC 2253 form, as Java's
`X500Principal.getName()` writes it (`CN=alice,OU=eng,O=example,C=FR`); no certificate is
`User:ANONYMOUS`. Other mapping rules are not implemented.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from typing import Any

from .settings import ListenerSecurityConfig

ANONYMOUS = "User:ANONYMOUS"
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
# Python's attribute names -> the keywords RFC 2253 / X500Principal use.
_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_EMAIL_OID = "1.2.840.113549.1.9.1"


class TlsConfigError(Exception):
    """TLS cannot be set up as configured; the message is one line naming the key."""


def server_context(config: ListenerSecurityConfig, listener: str) -> ssl.SSLContext:
    """The context of an SSL or SASL_SSL listener."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(context, config, listener)
    if not config.ssl_keystore_location and not (config.ssl_keystore_key and config.ssl_keystore_certificate_chain):
        raise TlsConfigError(f"listener {listener}: ssl.keystore.location (or ssl.keystore.key with "
                             "ssl.keystore.certificate.chain) is required for a TLS listener")
    _load_keystore(context, config, listener)
    context.verify_mode = _CLIENT_AUTH[config.ssl_client_auth]
    if context.verify_mode != ssl.CERT_NONE and not _load_truststore(
            context, config.ssl_truststore_location, config.ssl_truststore_certificates, listener, "ssl."):
        raise TlsConfigError(f"listener {listener}: ssl.client.auth={config.ssl_client_auth} needs "
                                 "ssl.truststore.location or ssl.truststore.certificates")
    return context


def client_context(*, truststore_location: str, truststore_certificates: str, keystore_location: str,
                   keystore_key: str, keystore_certificate_chain: str, key_password: str,
                   check_hostname: bool, prefix: str, who: str = "upstream") -> ssl.SSLContext:
    """A client's context (the sidecar's upstream, a peer process's listener): the system CAs unless
    a trust store is given; a client certificate when a key store is. `who` and `prefix` name the
    listener and keys in error messages."""
    context = ssl.create_default_context()
    context.check_hostname = check_hostname
    if not check_hostname:
        context.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(context, truststore_location, truststore_certificates, who, prefix)
    if keystore_location or keystore_key:
        _load_cert_chain(context, keystore_location, keystore_key, keystore_certificate_chain, key_password,
                         who, prefix)
    return context


def _protocols(context: ssl.SSLContext, config: ListenerSecurityConfig, listener: str) -> None:
    versions = sorted(_VERSIONS[v] for v in config.ssl_enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if config.ssl_cipher_suites:
        try:
            context.set_ciphers(":".join(config.ssl_cipher_suites))
        except ssl.SSLError as exc:
            raise TlsConfigError(f"listener {listener}: ssl.cipher.suites: no usable cipher ({exc.reason})") from exc


def _load_keystore(context: ssl.SSLContext, config: ListenerSecurityConfig, listener: str) -> None:
    _load_cert_chain(context, config.ssl_keystore_location, config.ssl_keystore_key,
                     config.ssl_keystore_certificate_chain, config.ssl_key_password, listener, "ssl.")


def _load_cert_chain(context: ssl.SSLContext, location: str, key: str, chain: str, password: str,
                     listener: str, prefix: str) -> None:
    secret = password or None
    if location:
        where = f"{prefix}keystore.location {location}"
        try:
            context.load_cert_chain(location, password=secret)
        except OSError as exc:
            if isinstance(exc, ssl.SSLError):
                raise TlsConfigError(f"listener {listener}: {where}: not a PEM private key with its "
                                     f"certificate chain, or a wrong {prefix}key.password ({exc.reason})") from exc
            raise TlsConfigError(f"listener {listener}: {where}: {exc.strerror or exc}") from exc
        return
    if not chain:
        raise TlsConfigError(f"listener {listener}: {prefix}keystore.key needs {prefix}keystore.certificate.chain")
    with _temporary(pem(chain)) as chain_file, _temporary(pem(key)) as key_file:
        try:
            context.load_cert_chain(chain_file, key_file, password=secret)
        except ssl.SSLError as exc:
            raise TlsConfigError(f"listener {listener}: {prefix}keystore.key / {prefix}keystore.certificate.chain: "
                                 f"not a PEM private key and certificate chain ({exc.reason})") from exc


def _load_truststore(context: ssl.SSLContext, location: str, certificates: str, listener: str, prefix: str) -> bool:
    try:
        if location:
            context.load_verify_locations(cafile=location)
            return True
        if certificates:
            context.load_verify_locations(cadata=pem(certificates))
            return True
    except ssl.SSLError as exc:
        raise TlsConfigError(f"listener {listener}: {prefix}truststore: not PEM CA certificates ({exc.reason})") from exc
    except OSError as exc:
        raise TlsConfigError(f"listener {listener}: {prefix}truststore.location {location}: "
                             f"{exc.strerror or exc}") from exc
    return False


def pem(text: str) -> str:
    """Inline PEM as a properties file holds it: `\\n` escapes (Java properties) are line breaks."""
    return text.replace("\\n", "\n") if "\n" not in text else text


@contextlib.contextmanager
def _temporary(text: str) -> Iterator[str]:
    """Inline PEM to a private temporary file (the ssl module loads key pairs from files only)."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        yield path
    finally:
        os.unlink(path)


def principal(peer_certificate: dict[str, Any] | None) -> str:
    """`User:<subject DN in RFC 2253>` of a verified client certificate, else `User:ANONYMOUS`."""
    if not peer_certificate or not peer_certificate.get("subject"):
        return ANONYMOUS
    return "User:" + distinguished_name(peer_certificate["subject"])


def distinguished_name(subject: Any) -> str:
    """RFC 2253: relative names most specific first (the reverse of the certificate's order),
    multi-valued ones joined by '+', special characters escaped."""
    names = []
    for rdn in reversed(subject):
        names.append("+".join(_attribute(kind, value) for kind, value in rdn))
    return ",".join(names)


def _attribute(kind: str, value: str) -> str:
    if kind == "emailAddress":  # no RFC 2253 keyword: Java writes the OID and the DER IA5String
        data = value.encode()
        if len(data) < 128:
            return f"{_EMAIL_OID}=#16{len(data):02x}{data.hex()}"
    return f"{_KEYWORDS.get(kind, kind)}={_escape(value)}"


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
