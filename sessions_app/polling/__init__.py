"""Engine.IO 4 long-polling and its upgrade to WebSocket, with no sticky sessions.

A polling session is a ``ChatConsumer`` run by the process that answered its handshake (its
owner), fed the ASGI WebSocket messages a real socket would bring (``session``): every
feature, budget, replay and heartbeat of the WebSocket path holds unchanged. The sid names
the owner's channel (``sids``), so a GET or POST landing on any other process is forwarded
to the owner through the channel layer (``endpoint``), and an upgrade WebSocket landing
elsewhere is relayed the same way (``upgrade``).
"""
