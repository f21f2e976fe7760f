"""The node: the assembly on top of every feature. It builds a coordinator node (embedded, sidecar,
one shard of several) from the runtime's machinery and the features, runs its lifecycle
(`server`), and holds the start-up checks that know features (`startup_checks`). Nothing below
imports it; connections get a `runtime.connection_services.ConnectionServices`, never the server.
"""
