"""The course as files: where the lessons are, their sources, nbgrader's cells and command line, and
the planted mistakes. Every other part of coursekit stands on this one; it imports none of them."""
