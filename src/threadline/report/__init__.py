"""What the CLI and the web pages both show, built once below both faces.

``text``: stored text made safe to show, and the numbers, times and bars; ``context``:
the context report of a session and its agent (``threadline context``, the chat's
``/context`` and the web page's context panel). Neither imports ``cli`` nor ``server``.
"""
