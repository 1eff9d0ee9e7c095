"""A hooks-API app whose ``on_message`` streams :data:`MATH_REPLY` a few characters at a time
(formulas arrive cut in the middle, as a model writes them), for math in the web page."""

from sessions_app import chat

MATH_REPLY = (
    "The area under the curve:\n\n"
    "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$\n\n"
    "Euler's identity $e^{i\\pi}+1=0$ links five constants, and \\(a_1 * b_1\\) stays math.\n\n"
    "It costs $5 and $6 in the shop; `$x$` is code.\n\n"
    "A broken one: $\\frac{1}{$ stays readable."
)
CHUNK = 7


@chat.on_message
async def answer(message: chat.Message) -> None:
    reply = chat.Message()
    for start in range(0, len(MATH_REPLY), CHUNK):
        await reply.stream_token(MATH_REPLY[start : start + CHUNK])
    await reply.send()
