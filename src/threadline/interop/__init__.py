"""Provider formats, importers from other tools, and exporters.

Re-exports only; each module's docstring says what it is for.
"""

from threadline.interop.anthropic_format import from_anthropic, to_anthropic
from threadline.interop.export import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    ImportedSession,
    from_json_export,
    render_export,
    to_json,
    to_markdown,
)
from threadline.interop.html_export import to_html
from threadline.interop.importers import (
    FORMATS,
    detect_format,
    import_file,
    import_sessions,
    read_aider,
    read_claude_code,
    read_codex,
    read_gemini,
    read_openai_chat,
    read_openai_runs,
    read_openhands,
    read_openhands_runs,
    read_swe_agent,
    read_transcript,
    read_transcript_runs,
)
from threadline.interop.openai_format import (
    MediaResolver,
    message_from_openai,
    message_to_openai,
    messages_from_openai,
    messages_to_openai,
    to_openai,
)
from threadline.interop.provider_rules import anthropic_problems, openai_problems
from threadline.interop.responses_format import items_to_messages, messages_to_items
from threadline.interop.sync import (
    Source,
    Syncer,
    SyncReport,
    SyncResult,
    SyncStatus,
    find_sources,
)

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "FORMATS",
    "ImportedSession",
    "MediaResolver",
    "Source",
    "SyncReport",
    "SyncResult",
    "SyncStatus",
    "Syncer",
    "anthropic_problems",
    "detect_format",
    "find_sources",
    "from_anthropic",
    "from_json_export",
    "import_file",
    "import_sessions",
    "items_to_messages",
    "message_from_openai",
    "message_to_openai",
    "messages_from_openai",
    "messages_to_items",
    "messages_to_openai",
    "openai_problems",
    "read_aider",
    "read_claude_code",
    "read_codex",
    "read_gemini",
    "read_openai_chat",
    "read_openai_runs",
    "read_openhands",
    "read_openhands_runs",
    "read_swe_agent",
    "read_transcript",
    "read_transcript_runs",
    "render_export",
    "to_anthropic",
    "to_html",
    "to_json",
    "to_markdown",
    "to_openai",
]
