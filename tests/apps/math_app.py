"""A hooks-API app whose ``on_message`` streams :data:`MATH_REPLY` a few characters at a time
(formulas arrive cut in the middle, as a model writes them), for math in the web page; asked
``escape``, it sends :data:`ESCAPE_REPLY`, formulas that try to draw outside their box."""

from sessions_app import chat

MATH_REPLY = (
    "The area under the curve:\n\n"
    "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$\n\n"
    "Euler's identity $e^{i\\pi}+1=0$ links five constants, and \\(a_1 * b_1\\) stays math.\n\n"
    "It costs $5 and $6 in the shop; `$x$` is code.\n\n"
    "A broken one: $\\frac{1}{$ stays readable."
)
# A rule far bigger than the page, a rule drawn to the left of its formula (over the text
# before it), and a formula too long to typeset.
ESCAPE_REPLY = (
    "Huge:\n\n$$\\rule{500em}{500em}$$\n\n"
    "Before the banner $x\\llap{\\rule{30em}{1em}}$ after it.\n\n"
    "Long: $" + "x+" * 1500 + "x$ end."
)
CHUNK = 7


@chat.on_message
async def answer(message: chat.Message) -> None:
    if message.content == "escape":
        await chat.Message(ESCAPE_REPLY).send()
        return
    reply = chat.Message()
    for start in range(0, len(MATH_REPLY), CHUNK):
        await reply.stream_token(MATH_REPLY[start : start + CHUNK])
    await reply.send()
