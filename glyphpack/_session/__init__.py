"""The session layer: one (conversation, agent) as a harness drives it, on top of the
transcript store, the session tree and the compaction ladder."""
