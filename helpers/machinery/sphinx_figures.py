"""Sphinx extension of the book's build (`_config.yml`: `extra_extensions`): every image of a figure links to its
full-size file.

A figure wider than the text column is shown shrunk to it; a reader who wants its detail clicks it and gets the
image at its own size. Sphinx links an image to its file only when the page resizes it with an option (`:width:`,
`:scale:`), which the book's glued figures do not use: the browser shrinks them. This wraps each figure's image in
that link itself, pointing where the HTML builder copies the image (`_images/`).
"""

from __future__ import annotations

import posixpath

from docutils import nodes


def link_figure_images(app, doctree: nodes.document, docname: str) -> None:
    """Wrap the image of every figure of `docname` in a link to its full-size copy in the build's `_images/`."""
    if app.builder.format != "html":
        return
    from sphinx.util.osutil import relative_uri

    images = app.builder.env.images
    imgpath = relative_uri(app.builder.get_target_uri(docname), "_images")
    for fig in doctree.findall(nodes.figure):
        for image in list(fig.findall(nodes.image)):
            if isinstance(image.parent, nodes.reference):
                continue
            candidates = image.get("candidates", {})
            uri = next((candidates[m] for m in ("image/png", "image/svg+xml", "image/jpeg") if m in candidates),
                       image["uri"])
            if uri not in images:
                continue              # a remote image: nothing copied to link to
            ref = nodes.reference("", "", internal=True, refuri=posixpath.join(imgpath, images[uri][1]))
            ref["classes"].append("figure-full-size")
            image.replace_self(ref)
            ref.append(image)


def setup(app):
    app.connect("doctree-resolved", link_figure_images)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
