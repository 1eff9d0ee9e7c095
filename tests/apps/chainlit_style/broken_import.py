from sessions_app import chat as cl

# An app whose import fails (a package that is not installed): the server must not start.

import a_package_this_app_forgot_to_install  # type: ignore[import-not-found]  # noqa: F401


@cl.on_message
async def main(message: cl.Message):
    await cl.Message(content="never").send()
