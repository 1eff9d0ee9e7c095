from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable
from langchain_core.runnables.config import RunnableConfig

from sessions_app import chat as cl

# Chainlit's LangChain (LCEL) integration as its docs show it, with langchain_core's own fake
# chat model standing in for a hosted one: the handler, passed in the config of ``astream``,
# shows the model call as a step while the app streams the chain's output into its message.
model = FakeListChatModel(responses=["The Battle of Hastings was in 1066."])


@cl.on_chat_start
async def on_chat_start():
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You're a very knowledgeable historian who provides accurate answers."),
            ("human", "{question}"),
        ]
    )
    runnable = prompt | model | StrOutputParser()
    cl.user_session.set("runnable", runnable)


@cl.on_message
async def on_message(message: cl.Message):
    runnable: Runnable[dict[str, str], str] = cl.user_session.get("runnable")

    msg = cl.Message(content="")

    async for chunk in runnable.astream(
        {"question": message.content},
        config=RunnableConfig(callbacks=[cl.LangchainCallbackHandler()]),
    ):
        await msg.stream_token(chunk)

    await msg.send()
