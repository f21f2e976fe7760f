"""The API contract every feature speaks: the request context, the handler, the deferred reply and
the registry (`registry`), and the one way to answer (`respond`). It imports the wire (`protocol`)
and nothing of `coordinator`, so any feature, and the runtime that serves it, may depend on it."""
