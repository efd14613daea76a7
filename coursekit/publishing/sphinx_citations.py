"""A Sphinx extension of the book: a bibliography that assistive technology reads as a list.

Docutils writes the citations of a bibliography as a ``<div role="list">`` of
``<div role="doc-biblioentry">`` entries. ARIA has deprecated ``doc-biblioentry``, and a list
whose entries are not list items is no list to a screen reader (axe-core:
``aria-required-children``, critical, on references.html). A bullet or numbered bibliography
(sphinxcontrib-bibtex's ``:list:`` option) would be a real list, but citations link only into
the default kind, so the book keeps that and writes each entry as a list item instead: same
element, classes and ids, so the theme's styles and the ``[label]`` links work as before.

Loaded by book/_config.yml (``sphinx: extra_extensions``).
"""

from __future__ import annotations

from docutils import nodes


def visit_citation(self, node: nodes.citation) -> None:
    """As docutils' HTML writer does it, with the role ``listitem`` for each entry."""
    if not isinstance(node.previous_sibling(), type(node)):  # the first of a run of entries
        self.body.append('<div role="list" class="citation-list">\n')
    self.body.append(self.starttag(node, "div", classes=[node.tagname], role="listitem"))


def depart_citation(self, node: nodes.citation) -> None:
    self.body.append("</div>\n")
    if not isinstance(node.next_node(descend=False, siblings=True), type(node)):  # the last
        self.body.append("</div>\n")


def setup(app) -> dict:
    app.add_node(nodes.citation, override=True, html=(visit_citation, depart_citation))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
