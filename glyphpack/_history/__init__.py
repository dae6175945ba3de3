"""Transcripts and the session tree (no numba, no renderer).

    ids        message ids; conversation and agent ids checked as file-name-safe
    messages   Message and its content blocks (one class per block type); turn boundaries
    codec      glyphpack's own JSON form
    convert    Anthropic Messages and OpenAI Chat Completions, to and from
    pricing    what messages cost in tokens, given a pricer
    tree       SessionTree: messages with parent pointers, a tip per conversation (SQLite)
    store      Workspace: one JSON transcript per (conversation, agent), checkpoints
    export     JSON and Markdown exports and the tree drawing
"""
