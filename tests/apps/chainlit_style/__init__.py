"""Small Chainlit-style apps, each written for the tests and each using one feature the way
Chainlit's docs show it, with only the import changed (``from sessions_app import chat as cl``)."""
