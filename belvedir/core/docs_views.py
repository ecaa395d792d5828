"""The documentation site, served from its MkDocs build (mkdocs.yml: var/docs-site/) at /docs/, to anyone: it holds
nothing a visitor of the repository could not read."""

from pathlib import Path

from django.conf import settings
from django.http import Http404
from django.shortcuts import render
from django.views.static import serve


def site_root() -> Path:
    return Path(settings.DOCS_SITE_DIR)


def docs(request, path: str = ""):
    root = site_root()
    if not (root / "index.html").is_file():
        return render(request, "core/docs_missing.html", status=404)
    # A directory's page is its index.html (use_directory_urls); serve() refuses paths that climb out of the root.
    wanted = path if path and not path.endswith("/") else f"{path}index.html"
    if not (root / wanted).resolve().is_relative_to(root.resolve()):
        raise Http404("No such page in the documentation.")
    return serve(request, wanted, document_root=str(root))
