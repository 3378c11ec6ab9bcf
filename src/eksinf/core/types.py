"""Names for the shapes that YAML and JSON reads give, so an annotation says what a value is.

A document read from a unit, a values file, an API answer or a policy is a mapping with string
keys and values of any JSON type; `Doc` names it. Code that reads particular fields checks
them where it reads them (the API server's rule: a document's shape is data, never assumed).
"""

from __future__ import annotations

from typing import Any

Doc = dict[str, Any]  # one mapping as YAML or JSON reads it (a Kubernetes object, a policy, ...)
Docs = list[Doc]  # the documents of one unit or answer, in order
