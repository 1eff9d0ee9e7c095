"""Elements without a server: the element classes (what each sends, figures, bad input), the
upload type checks (sniffed, never the client's word), the upload endpoint with and without
other types allowed, the element endpoint's headers and owner check, and the deletions that
take stored files with them (a removal, a deleted thread, the uploads purge)."""

import uuid
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from media_app import elements, files, storage
from media_app.images import ImageRejected
from media_app.models import Element, Upload
from media_app.services import blocks_for_uploads, purge_uploads
from sessions_app import chat
from sessions_app.chat.elements import figure_json
from tests.apps.elements_app import Figure, pdf, png
from threads_app import services as thread_services

pytestmark = pytest.mark.django_db

OTHER_TYPES = ["image/*", "application/pdf", "text/plain", "text/csv"]


@pytest.fixture(autouse=True)
def elements_dir(settings, tmp_path: Path) -> Path:
    settings.STORAGES = {
        **settings.STORAGES,
        "tether_elements": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    return tmp_path


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="el-owner", password="pw-for-tests-1")


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def post_file(api: APIClient, data: bytes, name: str):
    return api.post("/api/uploads/", {"file": SimpleUploadedFile(name, data)}, format="multipart")


# --- the element classes ------------------------------------------------------------------


def test_each_element_class_carries_chainlits_type_and_fields() -> None:
    assert [cls.type for cls in (chat.Image, chat.File, chat.Pdf, chat.Text, chat.Plotly)] == [
        "image", "file", "pdf", "text", "plotly",
    ]  # fmt: skip
    image = chat.Image(name="a.png", content=b"x", size="large", display="side")
    assert (image.size, image.display, image.record_fields()) == ("large", "side", {"image_size": "large"})
    assert chat.Pdf(name="p", content=b"%PDF-", page=3).record_fields() == {"page": 3}
    assert chat.Pdf(name="p", content=b"%PDF-").mime == "application/pdf"
    text = chat.Text(name="t", content="print(1)", language="python")
    assert (text.mime, text.record_fields()) == ("text/plain", {"language": "python"})
    assert chat.File(path="/tmp/report.csv").name == "report.csv"  # the name defaults to the path's
    assert chat.File(url="https://example.com/x").url == "https://example.com/x"


def test_bad_element_arguments_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="needs path=, content= or url="):
        chat.File(name="nothing")
    with pytest.raises(ValueError, match="display must be"):
        chat.File(name="x", content=b"1", display="popup")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="figure must be"):
        chat.Plotly(name="p", figure=42)


def test_a_plot_takes_a_figure_object_its_dict_or_its_json() -> None:
    as_object = chat.Plotly(name="p", figure=Figure())
    assert as_object.content == Figure().to_json() and as_object.mime == "application/json"
    assert figure_json({"data": []}) == '{"data": []}'
    assert figure_json('{"data": []}') == '{"data": []}'
    with pytest.raises(ValueError):
        figure_json("{not json")


async def test_element_content_comes_from_bytes_text_or_a_path(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"\x00on disk")
    assert await chat.File(path=path).read_content() == b"\x00on disk"
    assert await chat.Text(content="é").read_content() == "é".encode()
    assert await chat.File(content=b"raw").read_content() == b"raw"
    assert await chat.File(url="https://example.com/x").read_content() is None


async def test_sending_outside_a_hook_says_so() -> None:
    with pytest.raises(RuntimeError, match="inside a hook"):
        await chat.File(content=b"x").send()


# --- upload type checks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (pdf(), "anything.bin", "application/pdf"),
        (png(), "photo.pdf", "image/png"),  # the bytes win over the name
        (b"a,b\n1,2\n", "table.csv", "text/csv"),
        (b"plain words", "notes", "text/plain"),
        ("été".encode(), "notes.txt", "text/plain"),
        (b"<!DOCTYPE html><p>hi", "page.txt", "text/html"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "x.png", "image/svg+xml"),
        (b"\x00\x01\x02binary", "x.txt", "application/octet-stream"),
        (b"%PDX-1.4 fake", "fake.pdf", "text/plain"),
        (
            b"PK\x03\x04rest",
            "doc.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
    ],
)
def test_a_files_type_is_read_from_its_bytes(data: bytes, name: str, expected: str) -> None:
    assert files.sniff(data, name) == expected


SVG = b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>"
BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (BOM + b"<!DOCTYPE html><p>hi", "page.html", "text/html"),
        (b"<!-- saved from the web -->\n<html><script>x</script>", "page.html", "text/html"),
        (BOM + b"\n <!-- a -->\n<!-- b -->\r\n<body onload=x>", "page.txt", "text/html"),
        (b"<!-- a comment that never ends " + b"x" * 1000, "notes.txt", "text/html"),
        (BOM + b"<!-- Generator: an editor -->\n" + SVG, "logo.svg", "image/svg+xml"),
        (
            b"<?xml version='1.0'?>\n<!-- x -->\n<!DOCTYPE svg PUBLIC '-//W3C//DTD SVG 1.1//EN' 'x.dtd'>\n"
            + SVG,
            "logo.txt",
            "image/svg+xml",
        ),
        (b"<svg:svg xmlns:svg='http://www.w3.org/2000/svg'/>", "logo.txt", "image/svg+xml"),
        (b"\xff\xfe" + "<!-- x --><svg onload='x'/>".encode("utf-16-le"), "logo.svg", "image/svg+xml"),
        (b"\xfe\xff" + "<html><script>x</script>".encode("utf-16-be"), "page.txt", "text/html"),
        (b"<!DOCTYPE html><p>caf\xe9", "page.txt", "text/html"),  # not UTF-8, still HTML
        # Text that only starts with a comment or a BOM keeps its type.
        (b"<!-- badges -->\n# Title\n", "README.md", "text/markdown"),
        (BOM + b"a,b\n1,2\n", "table.csv", "text/csv"),
        (b"\xff\xfe" + "plain words".encode("utf-16-le"), "notes.txt", "application/octet-stream"),
        (b"a < b and <c>", "notes.txt", "text/plain"),
    ],
)
def test_markup_is_found_past_a_bom_white_space_comments_and_doctypes(
    data: bytes, name: str, expected: str
) -> None:
    assert files.sniff(data, name) == expected


def test_html_and_svg_behind_a_bom_or_a_comment_are_refused_at_upload(api, settings) -> None:
    settings.UPLOAD_ALLOWED_TYPES = ["*/*"]
    for data, name in [
        (BOM + b"<!DOCTYPE html><script>alert(1)</script>", "page.html"),
        (b"<!-- hi -->\n" + SVG, "logo.svg"),
        (b"\xff\xfe" + "<html><script>x</script>".encode("utf-16-le"), "page.html"),
    ]:
        response = post_file(api, data, name)
        assert response.status_code == 400, name
        assert "not accepted here" in str(response.json()), name
    assert post_file(api, BOM + b"plain words", "notes.txt").status_code == 201
    assert not Upload.objects.filter(name__in=["page.html", "logo.svg"]).exists()


def test_allowed_types_match_exactly_or_by_family_and_never_let_html_in(settings) -> None:
    settings.UPLOAD_ALLOWED_TYPES = ["image/*", "application/pdf", "*/*"]
    assert files.is_allowed("image/webp") and files.is_allowed("application/pdf")
    assert files.is_allowed("text/csv")  # */*
    assert not files.is_allowed("text/html") and not files.is_allowed("image/svg+xml")
    settings.UPLOAD_ALLOWED_TYPES = ["application/pdf"]
    assert not files.is_allowed("text/plain")


def test_check_upload_refuses_empty_big_and_unlisted_files(settings) -> None:
    settings.UPLOAD_ALLOWED_TYPES = ["application/pdf"]
    settings.UPLOAD_MAX_BYTES = 1000
    assert files.check_upload(pdf(), "r.pdf") == "application/pdf"
    with pytest.raises(files.FileRejected, match="empty"):
        files.check_upload(b"", "r.pdf")
    with pytest.raises(files.FileRejected, match="the limit is 1 KB"):
        files.check_upload(b"%PDF-" + b"0" * 2000, "r.pdf")
    with pytest.raises(files.FileRejected, match="Files of type text/plain are not accepted here"):
        files.check_upload(b"a text", "r.pdf")


def test_by_default_only_photos_are_uploaded_and_a_pdf_is_a_clear_400(api) -> None:
    response = post_file(api, pdf(), "report.pdf")
    assert response.status_code == 400
    assert response.json() == {
        "file": ["The file is not a JPEG, PNG, GIF or WebP image (checked by its content, not its name)."]
    }
    assert Upload.objects.count() == 0


def test_an_allowed_file_is_uploaded_into_the_storage_not_the_row(api, user, settings, elements_dir) -> None:
    settings.UPLOAD_ALLOWED_TYPES = OTHER_TYPES
    response = post_file(api, b"a,b\n1,2\n", "table.csv")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["contentType"], body["size"], body["name"]) == ("text/csv", 8, "table.csv")
    stored = Upload.objects.get(pk=body["id"])
    assert bytes(stored.data) == b"" and (elements_dir / stored.storage_key).read_bytes() == b"a,b\n1,2\n"
    # A photo still goes into the row, as before.
    photo = post_file(api, png(), "p.png")
    assert photo.status_code == 201 and bytes(Upload.objects.get(pk=photo.json()["id"]).data) == png()
    # A type not listed, or a file over UPLOAD_MAX_BYTES, is a 400 that says why.
    refused = post_file(api, b"\x00\x01\x02", "blob.bin")
    assert refused.status_code == 400
    assert "application/octet-stream are not accepted here" in refused.json()["file"][0]
    settings.UPLOAD_MAX_BYTES = 10
    big = post_file(api, b"x" * 100, "big.txt")
    assert big.status_code == 400 and "the limit is 10 bytes" in big.json()["file"][0]


def test_purging_uploads_deletes_their_stored_files(api, settings, elements_dir) -> None:
    settings.UPLOAD_ALLOWED_TYPES = OTHER_TYPES
    key = Upload.objects.get(pk=post_file(api, pdf(), "r.pdf").json()["id"]).storage_key
    assert (elements_dir / key).exists()
    assert purge_uploads(timedelta(seconds=-1)) == 1
    assert not (elements_dir / key).exists()


# --- the records, the endpoint, the deletions -------------------------------------------------


def make_element(user: Any, thread_id: uuid.UUID, **kwargs: Any) -> Element:
    fields = {"type": "file", "name": "notes.txt", "data": b"hello", **kwargs}
    return elements.create_element(owner_id=user.pk, thread_id=thread_id, element_id=uuid.uuid4(), **fields)


def test_an_element_is_served_to_its_owner_only_with_safe_headers(api, user, django_user_model) -> None:
    thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    svg = make_element(user, thread.pk, name="logo.svg", data=b"<svg onload='x'/>", mime="image/svg+xml")
    response = api.get(f"/api/elements/{svg.pk}")
    assert response.status_code == 200
    # An SVG is never shown on the site's origin: a download of unknown type.
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == 'attachment; filename="logo.svg"'
    assert (
        response["X-Content-Type-Options"] == "nosniff" and response["Content-Security-Policy"] == "sandbox"
    )
    html = make_element(user, thread.pk, name="page.html", data=b"<p>x", mime="text/html")
    assert api.get(f"/api/elements/{html.pk}")["Content-Disposition"].startswith("attachment")
    image = make_element(user, thread.pk, type="image", name="p.png", data=png())
    assert image.mime == "image/png"
    assert api.get(f"/api/elements/{image.pk}")["Content-Disposition"] == 'inline; filename="p.png"'

    other = APIClient()
    other.force_authenticate(
        django_user_model.objects.create_user(username="el-other", password="pw-2-tests")
    )
    assert other.get(f"/api/elements/{image.pk}").status_code == 404
    assert APIClient().get(f"/api/elements/{image.pk}").status_code in (401, 403)


def test_an_image_element_must_be_an_image(user) -> None:
    with pytest.raises(elements.ElementRejected, match="is not a JPEG, PNG, GIF or WebP image"):
        make_element(user, uuid.uuid4(), type="image", name="x.png", data=b"<svg/>")
    assert Element.objects.count() == 0


def test_an_element_over_the_limit_is_refused(user, settings) -> None:
    settings.ELEMENT_MAX_BYTES = 4
    with pytest.raises(elements.ElementRejected, match="the limit is 4 bytes"):
        make_element(user, uuid.uuid4(), data=b"12345")


def test_sending_the_same_id_again_replaces_the_bytes(user, elements_dir) -> None:
    thread_id = uuid.uuid4()
    first = make_element(user, thread_id, data=b"one")
    second = elements.create_element(
        owner_id=user.pk, thread_id=thread_id, element_id=first.pk, type="file", name="notes.txt", data=b"two"
    )
    assert Element.objects.count() == 1 and storage.read_bytes(second.storage_key) == b"two"
    assert not (elements_dir / first.storage_key).exists() or first.storage_key == second.storage_key


def test_deleting_a_thread_deletes_its_elements_and_files(user, elements_dir) -> None:
    thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    element = make_element(user, thread.pk)
    path = elements_dir / element.storage_key
    assert path.exists()
    thread_services.soft_delete_thread(thread)
    assert not Element.objects.filter(pk=element.pk).exists() and not path.exists()


def test_a_thread_deleted_for_good_takes_its_elements_and_files(user, elements_dir) -> None:
    thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    element = make_element(user, thread.pk)
    thread.delete()
    assert not Element.objects.filter(pk=element.pk).exists()
    assert not (elements_dir / element.storage_key).exists()


def test_the_purge_deletes_elements_of_chats_that_never_made_a_thread(user, elements_dir) -> None:
    kept_thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    kept = make_element(user, kept_thread.pk)
    orphan = make_element(user, uuid.uuid4())  # sent in on_chat_start; the chat ended there
    out = StringIO()
    call_command("purge_uploads", "--hours", "1", stdout=out)
    assert Element.objects.count() == 2  # both are younger than an hour
    Element.objects.update(created_at=timezone.now() - timedelta(hours=2))
    call_command("purge_uploads", "--hours", "1", stdout=out)
    assert list(Element.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not (elements_dir / orphan.storage_key).exists() and (elements_dir / kept.storage_key).exists()
    assert "deleted 1 element(s) of chats that never started a thread" in out.getvalue()


def test_the_engine_runtime_refuses_a_file_that_is_not_a_photo(api, user, settings) -> None:
    """The engine runtime's sends carry photos as image blocks; a PDF upload is named in vain."""
    settings.UPLOAD_ALLOWED_TYPES = OTHER_TYPES
    upload_id = uuid.UUID(post_file(api, pdf(), "r.pdf").json()["id"])
    with pytest.raises(ImageRejected, match=f"upload {upload_id} is not a photo"):
        blocks_for_uploads(user, [upload_id])


def test_an_element_by_url_keeps_only_http_urls_or_paths(user) -> None:
    thread_id = uuid.uuid4()
    linked = make_element(user, thread_id, data=None, url="https://example.com/report.pdf", type="pdf")
    assert elements.element_dict(linked)["url"] == "https://example.com/report.pdf" and not linked.storage_key
    for bad in ("javascript:alert(1)", "data:text/html,x", "//evil.example/x.pdf", "/\\evil.example/x.pdf"):
        with pytest.raises(elements.ElementRejected, match="must be http"):
            make_element(user, thread_id, data=None, url=bad)
    served = make_element(user, thread_id, data=None, url="/static/report.pdf", type="pdf")
    assert elements.element_dict(served)["url"] == "/static/report.pdf"


def test_the_admin_lists_elements_with_their_thread(user, django_user_model, client) -> None:
    thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    make_element(user, thread.pk, name="report.csv", data=b"x" * 2048)
    admin = django_user_model.objects.create_superuser(username="el-admin", password="pw-admin-1234")
    client.force_login(admin)
    page = client.get("/admin/media_app/element/").content.decode()
    assert (
        "report.csv" in page and "2 KB" in page and f"/admin/threads_app/thread/{thread.pk}/change/" in page
    )
    assert client.get("/admin/media_app/element/?type__exact=file").status_code == 200
