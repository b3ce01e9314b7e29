"""divelab.chat: the black-box chat-model protocol that agent systems talk to.

- ``ChatModel``: ``complete(messages, tools) -> ChatResponse``.
- ``OpenAIChatClient``: any OpenAI-compatible endpoint (retries with backoff, clear HTTP errors).
- ``ScriptedChatModel``: replies from a list or a function, for tests and demos.
"""

from divelab.chat.openai_client import ChatClientError, ChatHTTPError, OpenAIChatClient, parse_chat_completion
from divelab.chat.scripted import ScriptedChatModel
from divelab.chat.types import (
    ChatModel,
    ChatResponse,
    Message,
    ToolCall,
    ToolSpec,
    assistant,
    repair_tool_pairs,
    system,
    tool,
    user,
)

__all__ = [
    "ChatClientError",
    "ChatHTTPError",
    "ChatModel",
    "ChatResponse",
    "Message",
    "OpenAIChatClient",
    "ScriptedChatModel",
    "ToolCall",
    "ToolSpec",
    "assistant",
    "parse_chat_completion",
    "repair_tool_pairs",
    "system",
    "tool",
    "user",
]
