"""The http channel: the gateway's ASGI application, its request guard, payloads, reply
matching, streaming and health (docs/http-channel.md)."""
