from sessions_app import chat as cl

# ``@cl.header_auth_callback``: a header set by the proxy in front names the user.


@cl.header_auth_callback
def header_auth_callback(headers: dict[str, str]) -> cl.User | None:
    if headers.get("test-header") == "test-value":
        return cl.User(identifier="header-user", metadata={"role": "admin", "provider": "header"})
    return None


@cl.on_chat_start
async def start():
    await cl.Message(content=f"signed in as {cl.context.session.user.identifier}").send()
