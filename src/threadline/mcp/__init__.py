"""The MCP face: sessions, search and memory for other agents (``threadline mcp``).

``views`` answers each tool from the library as plain, paged, capped data; ``server``
registers those answers as MCP tools and resources on the official SDK; ``http``
serves them over streamable HTTP behind the server's bearer token. The SDK is
needed only here (the ``mcp`` extra).
"""
