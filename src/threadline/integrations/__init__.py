"""threadline inside agent frameworks, each in its own module so that importing one
needs only that framework's package:

- ``threadline.integrations.openai_agents``: ``ThreadlineSession``, a session for
  the OpenAI Agents SDK (``pip install 'threadline[agents]'``).
- ``threadline.integrations.langchain``: ``ThreadlineChatMessageHistory``, a
  LangChain chat message history (``pip install 'threadline[langchain]'``).
- ``threadline.integrations.langgraph``: ``ThreadlineSaver``, a LangGraph
  checkpointer (``pip install 'threadline[langgraph]'``).
- ``threadline.integrations.adk``: ``ThreadlineSessionService``, a Google ADK session
  service (``pip install 'threadline[adk]'``).
- ``threadline.integrations.pydantic_ai``: ``ThreadlineHistory``, Pydantic AI message
  histories (``pip install 'threadline[pydantic-ai]'``).
"""
