"""Importers: the session files harnesses write, as neutral histories.

    base         ImportReport, ImportedAgent, ImportedSession; the one repair pass that
                 makes every import a history a provider accepts; JSONL reading
    claude_code  Claude Code session JSONL (parent walk, merged responses, sidechains)
    pi           pi / oh-my-pi session JSONL
    codex        Codex CLI rollout JSONL
    swe_agent    SWE-agent ``.traj``
    gemini_cli   Gemini CLI chat recordings (``chats/session-*.json``)
    copilot_cli  GitHub Copilot CLI session events JSONL
    plain        JSON lists: OpenAI Chat Completions, OpenAI Responses items, Anthropic
                 Messages, Gemini contents, and glyphpack's own transcripts
    registry     format detection from content; ``import_file``
"""
