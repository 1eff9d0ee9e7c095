"""The web UI in the reader's language: Accept-Language picks English or French (LANGUAGES),
for the pages' own text (templates, locale/fr/LC_MESSAGES/django.mo) and for the strings of
the page's scripts (djangojs.mo, served by the JavaScript catalog at /jsi18n/)."""

import ast
import gettext
import re
import uuid
from pathlib import Path

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

LOCALE = Path(__file__).resolve().parents[2] / "locale" / "fr" / "LC_MESSAGES"


@pytest.fixture
def signed_in(django_user_model):
    def make(language: str) -> Client:
        client = Client(HTTP_ACCEPT_LANGUAGE=language)
        client.force_login(django_user_model.objects.create_user(username=f"u-{language}", password="pw-1"))
        return client

    return make


def test_the_chat_page_is_in_french_for_a_french_browser_and_in_english_otherwise(signed_in):
    page = signed_in("fr-FR,fr;q=0.9,en;q=0.5").get("/").content.decode()
    assert '<html lang="fr">' in page
    assert "<title>Nouvelle conversation · Tether</title>" in page
    assert '<button id="send" type="submit" class="primary">Envoyer</button>' in page
    assert 'placeholder="Écrire à Tether"' in page
    assert 'aria-label="Vos conversations"' in page
    assert 'value="dark" data-theme-choice> Sombre</label>' in page
    assert "<kbd>Entrée</kbd> envoie" in page
    assert "Connecté en tant que <strong>u-fr-FR,fr;q=0.9,en;q=0.5</strong>" in page
    assert ">Send<" not in page and "Message Tether" not in page

    english = signed_in("en-GB,en;q=0.8").get("/").content.decode()
    assert '<html lang="en">' in english
    assert '<button id="send" type="submit" class="primary">Send</button>' in english
    assert 'placeholder="Message Tether"' in english and 'aria-label="Your chats"' in english

    # The not-found page too.
    missing = signed_in("fr").get(f"/thread/{uuid.uuid4()}/")
    assert missing.status_code == 404
    assert "<h1>Introuvable</h1>" in missing.content.decode()

    # A language Tether has no catalog for falls back to English.
    assert '<html lang="en">' in signed_in("de-DE").get("/").content.decode()


def test_the_sign_in_page_and_its_error_follow_the_browser_language():
    french = Client(HTTP_ACCEPT_LANGUAGE="fr")
    page = french.get("/accounts/login/").content.decode()
    assert '<html lang="fr">' in page
    assert '<label for="id_username">Nom d&#x27;utilisateur</label>' in page or (
        '<label for="id_username">Nom d\'utilisateur</label>' in page
    )
    assert "<title>Se connecter · Tether</title>" in page
    failed = french.post("/accounts/login/", {"username": "nobody", "password": "wrong"}).content.decode()
    assert "ne correspondent pas. Veuillez réessayer." in failed

    english = Client(HTTP_ACCEPT_LANGUAGE="en").get("/accounts/login/").content.decode()
    assert '<html lang="en">' in english and '<label for="id_username">Username</label>' in english


def test_the_javascript_catalog_serves_the_french_strings_of_the_scripts():
    french = Client(HTTP_ACCEPT_LANGUAGE="fr").get("/jsi18n/").content.decode()
    assert '"New chat": "Nouvelle conversation"' in french
    assert '"Connection lost. Reconnecting\\u2026": "Connexion perdue. Reconnexion\\u2026"' in french
    # Plurals with French's rule (0 and 1 are singular).
    assert re.search(r'"%\(count\)s photo": \[\s*"%\(count\)s photo",\s*"%\(count\)s photos"\s*\]', french)
    assert "(n > 1)" in french

    english = Client(HTTP_ACCEPT_LANGUAGE="en").get("/jsi18n/").content.decode()
    assert "Nouvelle conversation" not in english


def po_entries(path: Path) -> dict[str, str | list[str]]:
    """``{msgid: msgstr}`` of a .po file (``msgctxt\x04msgid`` with a context, the msgstr[n]
    list for a plural), the way gettext keys its .mo files."""
    entries: dict[str, str | list[str]] = {}
    for block in path.read_text().split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            match = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d\])?) (".*")$', line)
            if match:
                key = match.group(1)
                fields[key] = ast.literal_eval(match.group(2))
            elif line.startswith('"') and key:
                fields[key] += ast.literal_eval(line)
        if not fields.get("msgid"):
            continue  # the header
        msgid = fields["msgid"] if "msgctxt" not in fields else f"{fields['msgctxt']}\x04{fields['msgid']}"
        plurals = sorted(k for k in fields if k.startswith("msgstr["))
        entries[msgid] = [fields[k] for k in plurals] if plurals else fields["msgstr"]
    return entries


@pytest.mark.parametrize("domain", ["django", "djangojs"])
def test_the_french_catalogs_are_complete_and_compiled(domain):
    """Every string has its French, and the committed .mo (what Django reads; CI does not
    compile) says what the .po says: run compilemessages after editing a .po."""
    entries = po_entries(LOCALE / f"{domain}.po")
    assert len(entries) > 40
    untranslated = [
        msgid for msgid, text in entries.items() if not all(text if isinstance(text, list) else [text])
    ]
    assert untranslated == [], f"{domain}.po has strings without French"
    assert "#, fuzzy" not in (LOCALE / f"{domain}.po").read_text()
    with (LOCALE / f"{domain}.mo").open("rb") as compiled:
        mo = gettext.GNUTranslations(compiled)
    for msgid, text in entries.items():
        if isinstance(text, list):  # French: 0 and 1 take the singular
            assert [mo.ngettext(msgid, msgid, 1), mo.ngettext(msgid, msgid, 2)] == text, msgid
        elif "\x04" in msgid:
            assert mo.pgettext(*msgid.split("\x04")) == text, msgid
        else:
            assert mo.gettext(msgid) == text, f"{domain}.mo is older than {domain}.po: {msgid!r}"
