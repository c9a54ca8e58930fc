"""The archive's read-only HTTP service: a JSON API for programs and server-rendered pages
for people, over one archive root (:func:`shopbench.archive.api.app.create_app`)."""
