"""Serving with DEBUG off (as ``./rlt up`` and production do): our error pages, static files through whitenoise."""

import re

import pytest
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import include, path

from tests.dom import page

pytestmark = pytest.mark.django_db


def _fail(request):
    raise RuntimeError("something broke")


# Used by the 500 test through @pytest.mark.urls: the project's URLs plus one view that fails.
urlpatterns = [path("fail/", _fail), path("", include("config.urls"))]


def test_an_unknown_url_shows_our_page_not_found_without_listing_the_url_patterns(client, settings):
    assert settings.DEBUG is False
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert "404.html" in [t.name for t in response.templates]
    doc = page(response)
    assert "Page not found" in doc.text
    assert "/" in doc.hrefs  # a way back
    html = response.content.decode()
    assert "URLconf" not in html and "admin/" not in html


@pytest.mark.urls(__name__)
def test_a_failing_page_shows_our_server_error_page_without_a_traceback_or_a_query(django_assert_num_queries):
    client = Client(raise_request_exception=False)
    with django_assert_num_queries(0):
        response = client.get("/fail/")
    assert response.status_code == 500
    doc = page(response)
    assert "Something went wrong" in doc.text
    assert "/static/css/app.css" in [link["href"] for link in doc.select("link[rel=stylesheet]")]  # styled
    html = response.content.decode()
    assert "something broke" not in html and "Traceback" not in html


def collected_storages(storages: dict) -> dict:
    return {**storages, "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}


@pytest.fixture(scope="module")
def collected_root(tmp_path_factory):
    """The static files collected once for this module's tests, which only read them."""
    from django.conf import settings

    root = tmp_path_factory.mktemp("static")
    with override_settings(STATIC_ROOT=root, STORAGES=collected_storages(settings.STORAGES)):
        call_command("collectstatic", interactive=False, verbosity=0)
    return root


@pytest.fixture
def collected(settings, collected_root):
    """The static files collected as ``./rlt up`` collects them, with hashed names."""
    settings.STATIC_ROOT = collected_root
    settings.STORAGES = collected_storages(settings.STORAGES)


def test_pages_load_their_css_js_and_htmx_from_collected_static_files_with_hashed_names(collected):
    client = Client()  # whitenoise reads STATIC_ROOT when the middleware is built
    doc = page(client.get("/login/"))
    urls = [link["href"] for link in doc.select("link[href]")] + [script["src"] for script in doc.select("script[src]")]
    assert all(url.startswith("/static/") for url in urls), urls
    names = [u.rsplit("/", 1)[1] for u in urls]
    assert all(re.search(r"\.[0-9a-f]{12}\.", name) for name in names), names
    assert any(n.startswith("app.") and n.endswith(".css") for n in names), names
    assert any(n.startswith("app.") and n.endswith(".js") for n in names), names
    assert any(n.startswith("htmx") for n in names), names
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert "immutable" in response["Cache-Control"], url
        b"".join(response.streaming_content)
        response.close()


def test_every_page_links_a_favicon_that_whitenoise_serves_and_favicon_ico_leads_there(collected):
    client = Client()
    for doc in (page(client.get("/login/")), page(client.get("/no-such-page/"))):
        [icon] = doc.select("link[rel=icon]")
        assert re.fullmatch(r"/static/favicon\.[0-9a-f]{12}\.svg", icon["href"]), icon["href"]
    response = client.get(icon["href"])
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(response.streaming_content)
    response.close()
    # /favicon.ico, which the admin's pages and tools ask for without reading the page, leads there too.
    for ask in (client.get, client.head):
        redirect = ask("/favicon.ico")
        assert redirect.status_code == 302 and redirect["Location"] == icon["href"]
