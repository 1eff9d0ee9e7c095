"""The web UI in French, end to end: a Chromium whose locale is fr-FR (so its Accept-Language
asks for French) gets the sign-in page, the chat page's own text (buttons, placeholder, labels
for screen readers) and the strings the page's scripts make (authors, Copy buttons, feedback,
the sidebar's actions, the connection banner) in French, from the JavaScript catalog at
/jsi18n/. A browser in English is covered by every other browser test, which find elements by
their English text and labels."""

import re
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from playwright.async_api import Browser, expect

from tests.apps.web_app import GREETING
from tests.e2e.test_theme_ui import THEME_PROBES, ThemedChat
from tests.e2e.test_web_ui import DESKTOP, PAGE_PROBES, TIMEOUT_MS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def french_server(server_factory, tmp_path_factory):
    return server_factory.start(
        CHAT_APP="tests.apps.web_app", ECHO_STATE_DIR=str(tmp_path_factory.mktemp("i18n-echo"))
    )


@pytest.fixture
async def open_french_chat(
    browser: Browser, french_server
) -> AsyncIterator[Callable[[], Awaitable[ThemedChat]]]:
    contexts = []

    async def open_page() -> ThemedChat:
        context = await browser.new_context(viewport=DESKTOP, locale="fr-FR", color_scheme="light")
        context.set_default_timeout(TIMEOUT_MS)
        await context.add_init_script(PAGE_PROBES)
        await context.add_init_script(THEME_PROBES)
        contexts.append(context)
        return ThemedChat(await context.new_page(), french_server.url)

    yield open_page
    for context in contexts:
        await context.close()


async def test_a_french_browser_gets_the_whole_ui_in_french(open_french_chat, make_user):
    chat = await open_french_chat()
    page = chat.page
    user = make_user()

    # The sign-in page, and its error.
    await page.goto(f"{chat.base_url}/accounts/login/")
    await expect(page.locator("html")).to_have_attribute("lang", "fr")
    await expect(page.get_by_label("Nom d'utilisateur")).to_be_visible()
    await page.get_by_label("Nom d'utilisateur").fill(user.username)
    await page.get_by_label("Mot de passe").fill("not the password")
    await page.get_by_role("button", name="Se connecter").click()
    await expect(page.get_by_role("alert")).to_contain_text("ne correspondent pas")
    await chat.shot("70-fr-sign-in-error")
    await chat.sign_in(user)

    # The page's own text: title, buttons, placeholder, labels for screen readers.
    await expect(page.locator("html")).to_have_attribute("lang", "fr")
    await expect(page).to_have_title("Nouvelle conversation · Tether")
    await expect(page.get_by_role("button", name="Envoyer")).to_be_visible()
    await expect(page.get_by_role("textbox", name="Message", exact=True)).to_have_attribute(
        "placeholder", "Écrire à Tether"
    )
    await expect(page.get_by_role("complementary", name="Vos conversations")).to_be_visible()
    await expect(page.get_by_role("button", name="+ Nouvelle conversation")).to_be_visible()
    await expect(page.get_by_role("searchbox", name="Rechercher")).to_be_visible()
    await page.get_by_role("button", name="Compte et thème").click()
    await expect(page.get_by_role("radiogroup", name="Thème", exact=True)).to_have_count(1)
    await expect(page.locator("#account-menu .theme-choices label")).to_have_text(
        ["Système", "Clair", "Sombre"]
    )
    await expect(page.get_by_role("button", name="Se déconnecter")).to_be_visible()
    await page.keyboard.press("Escape")
    await expect(page.locator("#composer-hint")).to_have_text(
        "Entrée envoie · Maj+Entrée nouvelle ligne · Échap arrête une réponse"
    )
    # The sidebar's empty state is written by sidebar.js.
    await expect(page.locator("#threads-empty")).to_have_text("Aucune conversation pour l'instant.")

    # Strings made by the scripts: authors, Copy, feedback, a thread's title and its actions.
    await expect(chat.locator(".msg-assistant .msg-body").first).to_have_text(GREETING)  # content is not UI
    await expect(chat.locator(".msg-assistant .msg-author").first).to_have_text("Assistant")
    await chat.send("Bonjour tout le monde")
    reply = chat.locator("#transcript > .msg-assistant:not([data-streaming])").nth(1)
    await expect(reply.locator(".msg-body")).to_have_text("Echo #1: Bonjour tout le monde")
    await expect(chat.locator("#transcript > .msg-user .msg-author")).to_have_text("Vous")
    await expect(reply.get_by_role("button", name="Copier le message")).to_have_text("Copier")
    await expect(reply.get_by_role("group", name="Avis sur cette réponse")).to_be_visible()
    await expect(reply.get_by_role("button", name="Bonne réponse")).to_have_attribute("title", "Pouce levé")
    await expect(
        page.get_by_role("button", name="Renommer la conversation « Bonjour tout le monde »")
    ).to_be_visible()
    await expect(
        page.get_by_role("button", name="Supprimer la conversation « Bonjour tout le monde »")
    ).to_be_visible()
    await reply.get_by_role("button", name="Bonne réponse").click()
    await expect(page.locator("#feedback-dialog-title")).to_have_text(
        "Pouce levé : quelque chose à ajouter ?"
    )
    await expect(page.get_by_role("button", name="Envoyer l'avis")).to_be_visible()
    await chat.shot("71-fr-feedback-dialog")
    await page.get_by_role("button", name="Annuler").click()

    # A "New chat" title set by chat.js, and the connection banner.
    await chat.new_chat()
    await expect(chat.locator("#thread-title")).to_have_text("Nouvelle conversation")
    await chat.page.evaluate("window.__blockSockets = true; window.__sockets.at(-1).close()")
    await expect(chat.locator("#banner-text")).to_have_text("Connexion perdue. Reconnexion…")
    await chat.shot("72-fr-chat-reconnecting")
    await chat.page.evaluate("window.__blockSockets = false")
    await expect(chat.locator("#banner")).to_be_hidden()
    await expect(page.locator("#thread-list .thread-link")).to_have_count(1)
    await chat.shot("73-fr-chat")
    assert not re.search(r"\b(Send|Copy|Sign out|New chat)\b", await page.locator("body").inner_text())
    await chat.assert_clean()
