"""Orchestration: flows that need the hub and AWS (or the hub and the build) together.

deploy (install, link, deploy, publish), sandbox, enroll's hub half and teardown's config half
live here, so the layers below never import each other sideways: `aws` never imports the hub,
and the hub never imports AWS. The CLI calls these flows; they call the layers below.
"""
