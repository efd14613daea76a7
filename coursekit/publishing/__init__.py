"""What readers and learners receive: the student edition (release.py) and the book (book.py)."""
