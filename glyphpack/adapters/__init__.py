"""Adapters that put glyphpack behind the seams agent frameworks already have, each an
optional extra whose framework package only its own module imports:

- ``glyphpack.adapters.openai_agents``: a ``Session`` for the OpenAI Agents SDK
  (``pip install '.[openai-agents]'``).
- ``glyphpack.adapters.langchain``: agent middleware for LangChain 1.x
  (``pip install '.[langchain]'``).
- ``glyphpack.adapters.pydantic_ai``: a capability for Pydantic AI
  (``pip install '.[pydantic-ai]'``).
- ``glyphpack.adapters.google_adk``: a session service and a plugin for Google ADK
  (``pip install '.[google-adk]'``).

Each keeps every message the framework gives it in a glyphpack workspace, sends the
model the compacted view (compacting at the threshold, recovering from "too long")
and offers ``glyphpack_recall`` as one of the framework's own tools.
"""
