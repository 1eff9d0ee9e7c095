from django.apps import AppConfig


class ChainlitCompatConfig(AppConfig):
    name = "chainlit_compat"
    verbose_name = "Chainlit's HTTP API"
