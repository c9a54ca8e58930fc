"""The archive's read-only HTTP service: a JSON API for programs and server-rendered pages
for people, over one archive root (:func:`shopbench.traces.api.app.create_app`)."""
