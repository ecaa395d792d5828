"""The documentation is a site: the README is its front page (under 25,000 bytes, every link resolving), the rest is
built by MkDocs with --strict (no broken link, no page left out) and served by the platform at /docs/."""

import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from mkdocs.commands.build import build
from mkdocs.config import load_config

ROOT = Path(django_settings.BASE_DIR)

pytestmark = pytest.mark.django_db


def test_the_readme_is_a_front_page_whose_every_link_resolves():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 25_000
    links = re.findall(r"\]\(([^)]+)\)", readme)
    local = [link for link in links if not re.match(r"https?://", link)]
    assert len(local) >= 20  # it points into the documentation rather than holding it
    missing = [link for link in local if not (ROOT / link.split("#")[0]).is_file()]
    assert not missing, missing
    assert "make run" in readme and "make test" in readme


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built as `make docs` builds it, into a folder of its own."""
    target = tmp_path_factory.mktemp("docs-site")
    build(load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(target)))
    return target


def test_the_site_builds_strictly_with_every_markdown_page_in_its_navigation(site):
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    built = {p.relative_to(site).as_posix() for p in site.rglob("index.html")}
    for page in pages:
        expected = "index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html"
        assert expected in built, page


def test_the_platform_serves_the_site_at_docs(client, site, settings):
    settings.DOCS_SITE_DIR = site
    front = client.get("/docs/")
    assert front.status_code == 200 and b"Belvedir" in b"".join(front.streaming_content)
    page = client.get("/docs/using/evals/")
    assert page.status_code == 200 and b"Pay once" in b"".join(page.streaming_content)
    assert client.get("/docs/using/no-such-page/").status_code == 404
    assert client.get("/docs/../../belvedir/settings.py").status_code == 404


def test_an_unbuilt_site_says_how_to_build_it(client, tmp_path, settings):
    settings.DOCS_SITE_DIR = tmp_path / "never-built"
    answer = client.get("/docs/")
    assert answer.status_code == 404 and "make docs" in answer.content.decode()
