"""The desk's published OpenAPI document says what the desk enforces, and nothing more or less: what a route's
signature cannot tell FastAPI is added here once the document is made (a NUL in a parameter is refused, the round
overrides must agree with this desk's configuration, what a batch upload's body is, which response feeds which
operation).

A request the published schema allows is one the desk accepts; schemathesis holds the desk to that in CI
(tests/desk/test_schemathesis.py, hooks in tests/desk/schemathesis_hooks.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from debate.plugins import TASKS
from markov_debate.desk.requests import AuditOverrides, AuditRequest, BatchLine
from markov_debate.desk.routes.batches import NAME_LIMIT
from markov_debate.desk.settings import DeskSettings

__all__ = ["BATCH_MEDIA", "publish"]

BATCH_MEDIA = ("application/x-ndjson", "application/json", "multipart/form-data")
"""What `POST /v1/batches` takes: JSON lines, a RefChecker JSON array, or a form with the file."""

_NO_NUL = "^[^\\u0000]*$"
_BATCH_OP = ("/v1/batches", "post")


def publish(app: FastAPI, settings: DeskSettings) -> None:
    """Make `app.openapi` return the completed document (built once, as FastAPI caches its own)."""
    made = app.openapi
    completed: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        if not completed:
            schema = made()
            for complete in _COMPLETIONS:
                complete(schema, settings)
            completed.append(schema)
        return completed[0]

    app.openapi = openapi  # type: ignore[method-assign]


def _nul_refusal(schema: dict[str, Any], _: DeskSettings) -> None:
    """NoNul refuses a NUL character in any path or query parameter."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                _exclude_nul(parameter.get("schema", {}))


def _exclude_nul(schema: dict[str, Any]) -> None:
    for option in schema.get("anyOf", []):
        _exclude_nul(option)
    if schema.get("type") == "string" and not {"pattern", "enum", "const", "format"} & set(schema):
        schema["pattern"] = _NO_NUL


_BODIES = ("AuditRequest", "ReviewIn", "AuditOverrides", "BatchLine")
"""The request bodies' models: every text in them reaches a store column, which cannot hold a NUL (a batch line
with one is listed in the answer's input_errors, so a body of no other line is refused)."""


def _body_nul_refusal(schema: dict[str, Any], _: DeskSettings) -> None:
    """The desk refuses a NUL anywhere in a request body (422 naming the field, `unstorable`): said on each of the
    bodies' strings, and on an object's keys, so a client generating requests from the schema never sends one."""
    components = schema.get("components", {}).get("schemas", {})
    for name in _BODIES:
        if name in components:
            _no_nul_inside(components[name])
    # the batch upload's own wrappers (a JSON line's id), around the BatchLine it refers to
    for media in ("application/x-ndjson", "application/json"):
        _no_nul_inside(schema["paths"][_BATCH_OP[0]][_BATCH_OP[1]]["requestBody"]["content"][media]["schema"])


def _no_nul_inside(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _no_nul_inside(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "string" and not {"pattern", "enum", "const", "format"} & set(node):
        node["pattern"] = _NO_NUL
    if node.get("type") == "object" and "additionalProperties" in node and "propertyNames" not in node:
        node["propertyNames"] = {"pattern": _NO_NUL}
    for key, child in node.items():
        if key not in ("not", "examples", "default", "const", "enum"):
            _no_nul_inside(child)


def _round_rules(schema: dict[str, Any], settings: DeskSettings) -> None:
    """min_rounds may not pass max_rounds, where a missing one is this desk's own value: JSON Schema cannot compare
    two fields, but min_rounds takes few values, so one rule per value says it."""
    debate = settings.verifier.debate
    overrides = schema["components"]["schemas"][AuditOverrides.__name__]
    low, high = _bounds(overrides, "min_rounds")
    rules: list[dict[str, Any]] = []
    for rounds in range(low, high + 1):
        allowed: dict[str, Any] = {"type": "integer", "minimum": rounds}
        then: dict[str, Any] = {"properties": {"max_rounds": allowed}, "required": ["max_rounds"]}
        if rounds <= debate.max_rounds:
            then = {"properties": {"max_rounds": {"anyOf": [allowed, {"type": "null"}]}}}
        rules.append(
            {"if": {"properties": {"min_rounds": {"const": rounds}}, "required": ["min_rounds"]}, "then": then}
        )
    unset = {"anyOf": [{"not": {"required": ["min_rounds"]}}, {"properties": {"min_rounds": {"type": "null"}}}]}
    floor = {"anyOf": [{"type": "integer", "minimum": debate.min_rounds}, {"type": "null"}]}
    rules.append({"if": unset, "then": {"properties": {"max_rounds": floor}}})
    overrides["allOf"] = rules
    overrides["description"] = (
        f"{overrides.get('description', '')} min_rounds may not exceed max_rounds; a round limit left out is this "
        f"desk's own (min_rounds {debate.min_rounds}, max_rounds {debate.max_rounds})."
    ).strip()


def _bounds(model: dict[str, Any], field: str) -> tuple[int, int]:
    options = model["properties"][field].get("anyOf", [model["properties"][field]])
    number = next(o for o in options if o.get("type") == "integer")
    return int(number["minimum"]), int(number["maximum"])


def _claim_limits(schema: dict[str, Any], settings: DeskSettings) -> None:
    """How many claims a request may give, and how long each may be, are this desk's settings (max_claims,
    max_claim_chars)."""
    most, longest = settings.verifier.claims.max_claims, settings.max_claim_chars
    for name in (AuditRequest.__name__, BatchLine.__name__):
        claims = schema["components"]["schemas"].get(name, {}).get("properties", {}).get("claims", {})
        for option in claims.get("anyOf", []):
            if option.get("type") != "array":
                continue
            if most is not None:
                option["maxItems"] = most
            items = option.get("items", {})
            # A sentence claim is held to the limit here; a triplet is measured as the sentence its three parts
            # make, which JSON Schema cannot add up (the 422 names the claim).
            if longest is not None and items.get("type") == "string":
                items["maxLength"] = longest


def _batch_body(schema: dict[str, Any], _: DeskSettings) -> None:
    """The upload is read from the raw body (FastAPI sees no body parameter): say what it may be."""
    line = {"$ref": _REF.format(model=BatchLine.__name__)}
    # At least one readable item: the others are listed in the answer's input_errors, not refused with the body.
    array = {"type": "array", "contains": line}
    # A JSON line has no index to stand in for its id.
    with_id = {"allOf": [line], "required": ["id"], "properties": {"id": {"type": ["string", "integer"]}}}
    lines = {"type": "array", "contains": with_id}
    form: dict[str, Any] = {
        "type": "object",
        "required": ["file"],
        "properties": {
            "file": {"type": "string", "format": "binary", "description": "JSON lines or a RefChecker JSON array."},
            "task": {"type": "string", "description": "As the `task` query parameter (the form's wins)."},
            "name": {"type": "string", "maxLength": NAME_LIMIT, "description": "As the `name` query parameter."},
        },
    }
    operation = schema["paths"][_BATCH_OP[0]][_BATCH_OP[1]]
    for parameter in operation["parameters"]:
        if parameter["name"] == "task":
            parameter["schema"]["enum"] = TASKS.names()
    form["properties"]["task"]["enum"] = TASKS.names()
    operation["requestBody"] = {
        "required": True,
        "description": "The items: one JSON object per line (application/x-ndjson; described here as the array "
        "of its lines), a RefChecker JSON array (application/json), or a multipart form whose `file` holds either. "
        "An unreadable line is listed in the answer's `input_errors` and the others are queued; a body with no "
        "readable item is refused (422).",
        "content": {
            "application/x-ndjson": {"schema": lines},
            "application/json": {"schema": array},
            "multipart/form-data": {"schema": form, "encoding": {"file": {"contentType": "application/x-ndjson"}}},
        },
    }
    schema["components"]["schemas"].setdefault(BatchLine.__name__, BatchLine.model_json_schema(ref_template=_REF))


_REF = "#/components/schemas/{model}"

_LINKS: dict[tuple[str, str, str], dict[str, tuple[str, str, dict[str, str]]]] = {
    # (path, method, status) of the operation whose answer feeds others: link name -> (path, method, parameters)
    ("/v1/audits", "post", "202"): {
        "GetAudit": ("/v1/audits/{audit_id}", "get", {"audit_id": "$response.body#/id"}),
        "GetReport": ("/v1/audits/{audit_id}/report", "get", {"audit_id": "$response.body#/id"}),
        "CancelAudit": ("/v1/audits/{audit_id}/cancel", "post", {"audit_id": "$response.body#/id"}),
        "RetryAudit": ("/v1/audits/{audit_id}/retry", "post", {"audit_id": "$response.body#/id"}),
    },
    ("/v1/audits", "get", "200"): {
        "GetFirstAudit": ("/v1/audits/{audit_id}", "get", {"audit_id": "$response.body#/items/0/id"}),
    },
    ("/v1/review-queue", "get", "200"): {
        "ReviewQueued": (
            "/v1/audits/{audit_id}/claims/{claim_id}/reviews",
            "post",
            {"audit_id": "$response.body#/0/audit_id", "claim_id": "$response.body#/0/claim_id"},
        ),
    },
    ("/v1/audits/{audit_id}", "get", "200"): {
        "ReviewFirstClaim": (
            "/v1/audits/{audit_id}/claims/{claim_id}/reviews",
            "post",
            {"audit_id": "$response.body#/id", "claim_id": "$response.body#/report/claims/0/claim_id"},
        ),
    },
    ("/v1/batches", "post", "202"): {
        "GetBatch": ("/v1/batches/{batch_id}", "get", {"batch_id": "$response.body#/id"}),
        "CancelBatch": ("/v1/batches/{batch_id}/cancel", "post", {"batch_id": "$response.body#/id"}),
        "RetryFailed": ("/v1/batches/{batch_id}/retry-failed", "post", {"batch_id": "$response.body#/id"}),
    },
}


def _links(schema: dict[str, Any], _: DeskSettings) -> None:
    """Which answer's id another operation takes (clients and stateful testers follow these)."""
    paths = schema["paths"]
    for (path, method, status), links in _LINKS.items():
        response = paths[path][method]["responses"][status]
        response["links"] = {
            name: {"operationId": paths[target][verb]["operationId"], "parameters": parameters}
            for name, (target, verb, parameters) in links.items()
        }


_COMPLETIONS: tuple[Callable[[dict[str, Any], DeskSettings], None], ...] = (
    _nul_refusal,
    _round_rules,
    _batch_body,  # before _claim_limits: it adds BatchLine to the components
    _claim_limits,
    _body_nul_refusal,  # after the others: it marks every string they left
    _links,
)
