from sessions_app import chat as cl

# ``@cl.oauth_callback`` as Chainlit's docs write it: Tether has no OAuth sign-in, so the app
# imports and runs, and the callback is never called.


@cl.oauth_callback
def oauth_callback(
    provider_id: str, token: str, raw_user_data: dict[str, str], default_user: cl.User
) -> cl.User | None:
    return default_user


@cl.on_message
async def main(message: cl.Message):
    await cl.Message(content=f"echo {message.content}").send()
