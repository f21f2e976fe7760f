"""Security: what a connection must prove and what a principal may do, with Kafka's names.

- `listeners`: `listeners`, `advertised.listeners` and `listener.security.protocol.map` parsed into
  one `Listener` per name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or a named listener mapped to one).
- `settings`: the security keys (`ssl.*`, `sasl.*`, `super.users`, ...), declared once; the TLS and
  SASL ones may be set per listener as `listener.name.<name>.<key>`, as in Kafka.
- `tls`: `ssl.SSLContext`s from PEM keystores and truststores; the principal of a client certificate.
- `jaas`, `plain`, `scram`, `sasl`: SASL PLAIN and SCRAM-SHA-256/512 (RFC 5802/7677, Kafka's
  ScramSaslServer behaviour) and the per-connection authentication state machine (the
  connection drives it as `runtime.auth.Authenticator`, through the listener's `gate`).
- `failures`: failed authentications delayed (`connection.failed.authentication.delay.ms`) and
  logged once per client address and interval with a count.
- `records`, `store`: SCRAM credentials and ACLs as records in the coordinator's log, and the pure
  state they replay into (a shard service, like offsets).
- `acls`, `authorizer`: Kafka's ACL model (StandardAuthorizer semantics) and the check every API makes.
- `checks`: the declared authorization rules of the group APIs (`api/authorization.py`) interpreted
  into the checks the node binds into them at start-up.
- `apis`: SaslHandshake, SaslAuthenticate, Create/Describe/DeleteAcls, Alter/DescribeUserScramCredentials.
"""
