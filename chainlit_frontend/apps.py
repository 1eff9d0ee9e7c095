from django.apps import AppConfig


class ChainlitFrontendConfig(AppConfig):
    name = "chainlit_frontend"
    verbose_name = "Chainlit's frontend"
