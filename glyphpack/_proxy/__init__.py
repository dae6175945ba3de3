"""``glyphpack proxy``: glyphpack in front of a harness it did not write (Claude Code,
Codex CLI, aider, an SDK loop), as an Anthropic- and OpenAI-compatible endpoint.

``conversations`` recognizes and records the conversation each request continues and
builds what is forwarded (no HTTP); ``streams`` reads server-sent events as they pass;
``server`` is the ASGI app (Starlette, uvicorn, httpx: the ``proxy`` extra).
"""
