"""threadline inside agent frameworks, each in its own module so that importing one
needs only that framework's package:

- ``threadline.integrations.openai_agents``: ``ThreadlineSession``, a session for
  the OpenAI Agents SDK (``pip install 'threadline[agents]'``).
- ``threadline.integrations.langchain``: ``ThreadlineChatMessageHistory``, a
  LangChain chat message history (``pip install 'threadline[langchain]'``).
- ``threadline.integrations.langgraph``: ``ThreadlineSaver``, a LangGraph
  checkpointer (``pip install 'threadline[langgraph]'``).
- ``threadline.integrations.langgraph_window``: ``window_hook``, a pre-model hook
  giving the model the thread's budgeted window (``pip install 'threadline[langgraph]'``).
- ``threadline.integrations.langgraph_store``: ``ThreadlineStore``, a LangGraph
  long-term memory store, ``BaseStore`` (``pip install 'threadline[langgraph]'``).
- ``threadline.integrations.adk``: ``ThreadlineSessionService``, a Google ADK session
  service (``pip install 'threadline[adk]'``).
- ``threadline.integrations.adk_memory``: ``ThreadlineMemoryService``, a Google ADK
  memory service, ``BaseMemoryService`` (``pip install 'threadline[adk]'``).
- ``threadline.integrations.pydantic_ai``: ``ThreadlineHistory``, Pydantic AI message
  histories, with ``ThreadlineHistory.processor`` and ``WindowCapability`` handing a
  run's model the budgeted window (``pip install 'threadline[pydantic-ai]'``).
"""
